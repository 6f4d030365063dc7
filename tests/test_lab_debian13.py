"""gpu-node.yml on a real Debian 13 (trixie) lab host: the 550 driver built with DKMS for the 6.12 cloud kernel."""

from __future__ import annotations

import json

import pytest

from tests.conftest import host_inventory, run_cli

pytestmark = [pytest.mark.lab, pytest.mark.slow]
DEFER = ("--var", "kernel_policy=upgrade", "--var", "reboot=defer", "--var", "driver_branch=550",
         "--var", "install_container_toolkit=false")  # NVIDIA's repository is not reachable from here


def gpu_node(inventory, report, *args):
    return run_cli("provision", "-i", str(inventory), "--playbook", "playbooks/gpu-node.yml", *DEFER, *args,
                   "--json-report", str(report), timeout=3600)


def newest_kernel(host) -> str:
    return host.run_inside("ls /boot | sed -n 's/^vmlinuz-//p' | sort -V | tail -n 1").stdout.strip()


def assert_second_run_is_quiet(inventory, tmp_path, *args) -> None:
    again = gpu_node(inventory, tmp_path / "second.json", *args)
    assert again.code == 0, again.output
    host = json.loads((tmp_path / "second.json").read_text())["hosts"][0]
    assert host["changed"] == 0, host["steps"]
    assert host["exec_count"] <= 2, host  # lock + facts, then the batched probe


def test_trixie_builds_the_550_driver_for_the_612_cloud_kernel(lab, fresh_trixie_host, tmp_path):
    """About 6-10 minutes: the 6.12 cloud kernel + headers and a real DKMS build of nvidia-current 550."""
    inventory = host_inventory(lab, [fresh_trixie_host], tmp_path / "inv.yml")
    first = gpu_node(inventory, tmp_path / "first.json")
    assert first.code == 0, first.output
    kernel = newest_kernel(fresh_trixie_host)
    assert kernel.startswith("6.12.") and kernel.endswith("-cloud-amd64"), kernel
    dkms = fresh_trixie_host.run_inside("dkms status").stdout
    assert "nvidia-current/550." in dkms and f"{kernel}, x86_64: installed" in dkms, dkms
    held = fresh_trixie_host.run_inside("apt-mark showhold").stdout.split()
    assert {"nvidia-kernel-dkms", "libnvidia-ml1", "libcuda1"} <= set(held), held
    assert fresh_trixie_host.run_inside("systemctl is-enabled nvidia-persistenced").stdout.strip() == "enabled"
    assert fresh_trixie_host.run_inside("systemctl is-active docker").stdout.strip() == "active"
    assert_second_run_is_quiet(inventory, tmp_path)


# Debian 13's nvidia-open-kernel-dkms 550.163.01-2 does not build for trixie's newest cloud kernel (6.12.117:
# "too few arguments to function 'pci_resize_resource'", an API change backported into 6.12.117), while the
# proprietary nvidia-kernel-dkms of the same version does. Measured 2026-11-23; see the README.
OLDEST_CLOUD_KERNEL = ("for k in $(apt-cache pkgnames linux-image-6.12 | "
                       "sed -n 's/^linux-image-\\(6\\.12\\.[0-9]*+deb13-cloud-amd64\\)$/\\1/p' | sort -V); do "
                       "apt-cache show linux-image-$k >/dev/null 2>&1 && "
                       "apt-cache show linux-headers-$k >/dev/null 2>&1 && echo $k && break; done")


def test_trixie_open_modules_come_from_nvidia_open_kernel_dkms(lab, fresh_trixie_host, tmp_path):
    """About 8-12 minutes. The image's kernel is an older 6.12 cloud kernel (installed first, as a cloud image
    would have it): kernel_modules: open installs nvidia-open-kernel-dkms (contrib) and builds nvidia-current-open
    for it, not the proprietary module."""
    host = fresh_trixie_host
    setup = host.run_inside("apt-get -q update >/dev/null; k=$(" + OLDEST_CLOUD_KERNEL + ") && "
                            "DEBIAN_FRONTEND=noninteractive apt-get -y -q --no-install-recommends install "
                            "linux-image-$k linux-headers-$k >/dev/null && echo \"kernel $k\"", timeout=1800)
    kernel = setup.stdout.rpartition("kernel ")[2].strip()
    assert kernel.startswith("6.12.") and kernel.endswith("+deb13-cloud-amd64"), setup.stdout + setup.stderr
    inventory = host_inventory(lab, [host], tmp_path / "inv.yml")
    first = gpu_node(inventory, tmp_path / "first.json", "--var", "kernel_modules=open")
    assert first.code == 0, first.output
    assert newest_kernel(host) == kernel  # the image's kernel is the target: nothing newer was installed
    packages = host.run_inside("dpkg-query -W -f='${Package} ${db:Status-Abbrev}\\n' nvidia-open-kernel-dkms "
                               "nvidia-kernel-dkms 2>/dev/null; true").stdout
    assert "nvidia-open-kernel-dkms hi" in packages and "nvidia-kernel-dkms" not in packages, packages
    dkms = host.run_inside("dkms status").stdout
    built = [line for line in dkms.splitlines() if f"{kernel}, x86_64: installed" in line]
    assert len(built) == 1 and built[0].startswith("nvidia-current-open/550."), dkms
    assert_second_run_is_quiet(inventory, tmp_path, "--var", "kernel_modules=open")
