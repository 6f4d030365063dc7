"""The driver's version argument, the other flavour left installed, and the driver's kin held (steps/nvidia_switch)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from gpunode.steps.base import build_step
from gpunode.steps.nvidia_switch import check_driver_version, kin_shell, present_packages
from gpunode.steps.pkgmgr import AptManager, DnfManager
from tests.plan_cases import build_facts


@pytest.mark.parametrize("version", [None, "535.309.01", "535.86", "535.216.01"])
def test_versions_of_the_branch_are_taken(version):
    check_driver_version(version, 535)


@pytest.mark.parametrize(("version", "words"), [
    ("550.163.01", "is not of branch 535: set the branch to 550"),
    ("535", "is not a driver version"),
    ("535.309.01-1~deb12u1", "is not a driver version"),  # a package version, not the driver's
    ("latest", "is not a driver version"),
])
def test_other_versions_are_usage_errors_that_say_the_fix(version, words):
    with pytest.raises(ValueError, match=words):
        check_driver_version(version, 535)
    with pytest.raises(ValueError, match=words):
        build_step("nvidia_driver", {"branch": 535, "version": version})


def test_a_half_configured_package_counts_as_present_a_removed_one_does_not():
    facts = build_facts("debian-13", {"pkg": {"dpkg_unfinished": ["nvidia-open-kernel-dkms:half-configured"]},
                                      "installed_packages": {"nvidia-open-kernel-support": "550.163.01-2"}})
    names = ("nvidia-open-kernel-dkms", "nvidia-open-kernel-support", "nvidia-kernel-dkms")
    assert present_packages(facts, names) == ["nvidia-open-kernel-dkms", "nvidia-open-kernel-support"]


def test_kin_is_read_on_the_host_only_where_installed():
    apt = kin_shell(AptManager(), ["nvidia-modprobe"])
    assert "dpkg-query -W" in apt and "$1 == \"ii\"" in apt and "nvidia-modprobe" in apt
    dnf = kin_shell(DnfManager(), ["nvidia-modprobe"])
    assert dnf.startswith("$(rpm -q --qf") and "grep -v ' '" in dnf  # rpm prints "package X is not installed"


def test_the_kin_query_answers_with_installed_names_only_on_a_real_dpkg():
    """Run on this machine's dpkg (Debian): an installed package is printed, one dpkg does not know is not."""
    if not shutil.which("dpkg-query"):
        pytest.skip("no dpkg here")
    out = subprocess.run(["bash", "-c", f"echo {kin_shell(AptManager(), ['bash', 'nvidia-modprobe-not-here'])}"],
                         capture_output=True, text=True, check=True).stdout.split()
    assert out == ["bash"]


def test_a_wrong_driver_version_names_the_playbook_variable_it_came_from() -> None:
    """gpu-node.yml's `version: "{{ driver_version }}"`: the refusal names --var driver_version, not only the step's
    argument, before any host is contacted."""
    from tests.conftest import run_cli

    result = run_cli("provision", "-H", "nobody@127.0.0.2:1", "--playbook", "gpu-node", "--check", "--var",
                     "driver_version=550.163.01")
    said = " ".join(result.output.split())
    assert result.code == 2 and "the value comes from the variable driver_version" in said, result.output
    assert "give driver_version a valid value" in said and "default: driver_version=None" not in said
