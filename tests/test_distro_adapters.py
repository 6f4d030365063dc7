"""The adapters' parsers and the one version order / dkms parser, on the real output formats."""

from __future__ import annotations

from gpunode.facts.packages import dkms_installed, parse_dkms, version_at_least, version_key
from gpunode.facts.parse import kernel_package_name
from gpunode.parsers.dkms import parse_dkms_status
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
    assert dkms_installed(entries, ("nvidia-open",), "5.14.0-427.el9.x86_64")
    assert not dkms_installed(entries, ("nvidia",), "5.14.0-427.el9.x86_64")
    verify = parse_dkms_status(text)
    assert [(e.name, e.version, e.kernel, e.state) for e in verify] == [
        (e.module, e.version, e.kernel, e.status.split()[0]) for e in entries]
