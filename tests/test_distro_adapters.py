"""The adapters' parsers and the one version order / dkms parser, on the real output formats."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunode.distros import UnsupportedDistro, for_os
from gpunode.distros.versions import version_key
from gpunode.facts import OsInfo, PackageManagerInfo, parse_os_release
from gpunode.facts.packages import version_at_least
from gpunode.facts.parse import kernel_package_name
from gpunode.parsers.dkms import diverged_entries, dkms_installed, parse_dkms, parse_dkms_status
from gpunode.steps.pkgmgr import AptManager, DnfManager

# `dnf versionlock list` (dnf 4: name-EPOCH:VERSION-RELEASE.*) and `yum versionlock list` (AL2: EPOCH:name-...).
DNF_LOCKS = ("Last metadata expiration check: 0:12:09 ago on Mon 23 Nov 2026 10:00:00 AM UTC.\n"
             "nvidia-driver-3:550.163.01-1.el9.*\nnvidia-driver-cuda-3:550.163.01-1.el9.*\n"
             "kernel6.12-0:6.12.40-63.114.amzn2023.*\n!moby-engine-0:24.0.9-1.el9.*\n")
YUM_LOCKS = ("Loaded plugins: priorities, update-motd, versionlock\n0:kernel-5.10.225-213.878.amzn2.*\n"
             "versionlock list done\n")


def test_versionlock_lists_read_back_as_names():
    assert DnfManager("dnf").parse_held(DNF_LOCKS) == {"nvidia-driver", "nvidia-driver-cuda", "kernel6.12"}
    assert DnfManager("yum").parse_held(YUM_LOCKS) == {"kernel"}
    assert AptManager().parse_held("nvidia-kernel-dkms\nlibcuda1:amd64\n") == {"nvidia-kernel-dkms", "libcuda1"}


def test_hold_commands():
    assert AptManager().hold(["a", "b"]) == "apt-mark hold -- a b"
    assert DnfManager("dnf").hold(["kernel"]).endswith("dnf versionlock add -- kernel")
    assert "yum-plugin-versionlock" in DnfManager("yum").hold(["kernel"])
    assert DnfManager("dnf").unhold(["kernel"]) == "dnf versionlock delete -- kernel"


def test_kernel_package_line_from_the_owners_of_the_modules_directory():
    assert kernel_package_name(["kernel6.12", "kernel6.12-modules-extra"]) == "kernel6.12"
    assert kernel_package_name(["kernel-core", "kernel-modules"]) == "kernel"
    assert kernel_package_name([]) == ""


def test_one_version_order():
    assert version_at_least("570.148.08", "570.148.08") and version_at_least("570.172.08", "570.148.08")
    assert not version_at_least("565.57.01", "570.148.08")
    assert sorted(["5.15.0-1051-aws", "5.15.0-105-aws"], key=version_key) == ["5.15.0-105-aws", "5.15.0-1051-aws"]


def test_one_dkms_parser_for_plans_and_diagnosis():
    text = ("nvidia-current/550.163.01, 6.12.48+deb13-cloud-amd64, x86_64: installed\n"
            "nvidia-open, 550.54.15, 5.14.0-427.el9.x86_64, x86_64: installed (WARNING! Diff between built and "
            "installed module!)\nError! Could not locate dkms.conf file.\n")
    entries = parse_dkms(text)
    assert dkms_installed(entries, ("nvidia-current",), "6.12.48+deb13-cloud-amd64")
    # installed, but dkms says the files in the kernel tree are not the ones it built (issue 37: a copy cut short by
    # a full disk): not installed, and the plan installs it again
    assert not dkms_installed(entries, ("nvidia-open",), "5.14.0-427.el9.x86_64")
    assert [e.module for e in diverged_entries(entries, ("nvidia-open",), "5.14.0-427.el9.x86_64")] == ["nvidia-open"]
    assert not dkms_installed(entries, ("nvidia",), "5.14.0-427.el9.x86_64")
    verify = parse_dkms_status(text)
    assert [(e.name, e.version, e.kernel, e.state) for e in verify] == [
        (e.module, e.version, e.kernel, e.status.split()[0]) for e in entries]


# --- the distro adapters (gpunode/distros): picked from os-release, the facts the steps ask them ------------------
OS_RELEASE = Path(__file__).parent / "data" / "os-release"


def _os(name: str, arch: str = "x86_64") -> OsInfo:
    return parse_os_release((OS_RELEASE / f"{name}.txt").read_text(), arch=arch)


@pytest.mark.parametrize(("fixture", "adapter", "package_format"), [
    ("ubuntu-22.04", "Ubuntu", "deb"), ("debian-12", "Debian", "deb"), ("rhel-9", "Rhel", "rpm"),
    ("rocky-8", "El", "rpm"), ("almalinux-9", "El", "rpm"), ("amzn-2023", "Al2023", "rpm")])
def test_the_adapter_is_picked_from_the_os_release_id(fixture: str, adapter: str, package_format: str) -> None:
    distro = for_os(_os(fixture))
    assert type(distro).__name__ == adapter and distro.package_format == package_format
    distro.check_supported()


def test_an_id_outside_the_matrix_gets_the_adapter_of_its_id_like_and_is_refused() -> None:
    os = OsInfo(id="linuxmint", id_like=("ubuntu", "debian"), version_id="21.3", version_major=21,
                pretty_name="Linux Mint 21.3", family="debian")
    distro = for_os(os)
    assert distro.package_format == "deb" and distro.headers_package("6.5.0-1") == "linux-headers-6.5.0-1"
    with pytest.raises(UnsupportedDistro, match="Linux Mint 21.3 is not supported \\(supported: ubuntu "):
        distro.check_supported()


def test_the_driver_choice_is_refused_with_a_fix() -> None:
    with pytest.raises(UnsupportedDistro) as shipped:
        for_os(_os("debian-12")).check_driver_choice("distro", 550)
    assert shipped.value.fix == "set driver_branch: 535, or method: cuda-repo for other branches"
    for_os(_os("debian-12")).check_driver_choice("cuda-repo", 550)
    with pytest.raises(UnsupportedDistro) as ended:
        for_os(_os("ubuntu-22.04")).check_driver_choice("distro", 550)
    assert ended.value.fix.startswith("set driver_branch: 580")
    for_os(_os("ubuntu-22.04")).check_driver_choice("distro", 580)


def test_the_repositories_dkms_needs() -> None:
    assert for_os(_os("ubuntu-22.04")).extra_repos() == ""
    assert for_os(_os("rocky-8")).extra_repos().endswith("dnf config-manager --set-enabled powertools")
    assert for_os(_os("almalinux-9")).extra_repos().endswith("--set-enabled crb")
    rhel = for_os(_os("rhel-9"))
    assert rhel.extra_repos(PackageManagerInfo(rhsm_registered=True)).startswith(
        "subscription-manager repos --enable codeready-builder-for-rhel-9-$(arch)-rpms && ")
    assert "yum-config-manager --enable codeready-builder-for-rhel-9-rhui-rpms" in rhel.extra_repos(
        PackageManagerInfo(rhui_repo_files=("/etc/yum.repos.d/redhat-rhui.repo",)))
    with pytest.raises(UnsupportedDistro, match="neither registered"):
        rhel.extra_repos(PackageManagerInfo())


def test_what_the_steps_ask_differs_by_family() -> None:
    apt, rpm = for_os(_os("debian-12")), for_os(_os("rocky-8"))
    assert apt.ca_bundle == "/etc/ssl/certs/ca-certificates.crt" and rpm.ca_bundle == "/etc/pki/tls/certs/ca-bundle.crt"
    assert (apt.headers_script_family, rpm.headers_script_family) == ("apt", "rpm")
    assert apt.driver_pin("distro", 535) == "535.*" and apt.driver_pin("cuda-repo", 535) is None
    assert apt.toolkit_needs_keyring() and not rpm.toolkit_needs_keyring()
    assert rpm.nvidia_dnf_module("distro") and not rpm.nvidia_dnf_module("runfile") and not apt.nvidia_dnf_module("x")
    ubuntu = for_os(_os("ubuntu-22.04"))
    assert ubuntu.archive_precompiled("distro") and not ubuntu.archive_precompiled("cuda-repo")
    assert ubuntu.is_precompiled_package("linux-modules-nvidia-550-server-open-6.8.0-1015-aws")
    assert not apt.is_precompiled_package("linux-modules-nvidia-550-server-open-6.8.0-1015-aws")
