"""Held packages of another driver branch or flavour are found by name on apt (Canonical's nvidia-headless-<b>-server
all provide nvidia-headless: canonical/nvidia-graphics-drivers debian/control@a65eb85:205-213), never the
packages of the branch wanted, nor unrelated ones (kernel holds)."""

from __future__ import annotations

from gpunode.distros import for_os
from tests.plan_cases import build_facts


def test_other_branches_and_flavours_on_ubuntu() -> None:
    os = build_facts("ubuntu-22.04.txt", {}).os
    held = {"nvidia-headless-550-server", "nvidia-utils-550-server", "nvidia-headless-570-server",
            "nvidia-utils-570-server", "nvidia-headless-570-server-open", "nvidia-fabricmanager-550",
            "libnvidia-nscq-550", "linux-image-6.8.0-1015-aws", "nvidia-fabricmanager-570"}
    assert for_os(os).other_driver_packages("distro", 570, "proprietary", held) == [
        "libnvidia-nscq-550", "nvidia-fabricmanager-550", "nvidia-headless-550-server",
        "nvidia-headless-570-server-open", "nvidia-utils-550-server"]
    assert for_os(os).other_driver_packages("cuda-repo", 570, "open", {"cuda-drivers-550", "nvidia-open-550",
                                                                  "nvidia-open-570"}) == ["cuda-drivers-550",
                                                                                          "nvidia-open-550"]


def test_debian_distro_and_rpm_have_none() -> None:
    debian = build_facts("debian-12.txt", {}).os
    assert for_os(debian).other_driver_packages("distro", 535, "proprietary", {"nvidia-kernel-dkms"}) == []
    rocky = build_facts("rocky-9.txt", {}).os
    assert for_os(rocky).other_driver_packages("distro", 570, "proprietary", {"nvidia-driver"}) == []
