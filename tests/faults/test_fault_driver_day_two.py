"""Issue 37 on a real Debian 12 lab host, one DKMS build of the NVIDIA driver (opt-in: `-m extended`):

1. A power cut during an install (dpkg SIGKILLed mid-install) left dpkg interrupted: gpu-node.yml alone repairs it
   (the headers step, the first to install, finishes the transaction), and `--check` says so first. Before, the rerun
   failed with "dpkg was interrupted, you must manually run 'dpkg --configure -a'".
2. A newer kernel installed afterwards without its headers (the bootloader boots it next): `verify-gpu` reports
   `dkms-next-boot-kernel` naming it, and `provision --check` plans its headers and the module. Before, the rerun
   was "0 changed" and verify-gpu looked only at the running kernel.

The host first sees bookworm only (its kernel and driver), then bookworm-security (a newer kernel), as a host
installed before a security update does. Guards: steps/packages.py `repair_first` (used by steps/kernel.py and
steps/nvidia.py), steps/nvidia_dkms.py `next_boot_actions`, verify/checks/host.py `dkms-next-boot-kernel`.
"""

from __future__ import annotations

import json

import pytest

from gpunode.lab.apt_sources import RETRIED_UPDATE
from tests.conftest import host_inventory, run_cli
from tests.faults.helpers import start_provision, wait_inside

pytestmark = [pytest.mark.lab, pytest.mark.extended]
GPU_NODE = ("--playbook", "playbooks/gpu-node.yml", "--tags", "kernel,driver", "--var", "kernel_policy=upgrade",
            "--var", "reboot=defer")


def newest_kernel(host) -> str:
    return host.run_inside("ls /boot | sed -n 's/^vmlinuz-//p' | sort -V | tail -n 1").stdout.strip()


def interrupt_dpkg(host, inventory, tmp_path) -> None:
    """dpkg SIGKILLed while it installs `hello` (a slow post-invoke hook keeps it running), as a power cut would."""
    hook = host.root / "etc/dpkg/dpkg.cfg.d/slow"
    hook.write_text('post-invoke="sleep 6.6"\n')
    playbook = tmp_path / "hello.yml"
    playbook.write_text("steps:\n  - packages: {names: [hello], cache_valid_time: 0}\n")
    process = start_provision(inventory, playbook, tmp_path / "cut.json")
    assert wait_inside(host, "ps -eo args", "sleep 6.6", timeout=300), "dpkg never ran"
    host.run_inside("kill -KILL $(pgrep -xo dpkg)")
    process.communicate(timeout=120)
    hook.unlink()
    assert host.run_inside("dpkg --audit").stdout.strip(), "the kill did not leave dpkg interrupted"


def test_gpu_node_repairs_dpkg_and_sees_the_kernel_that_boots_next(lab, fresh_host, tmp_path):
    """About 5-8 minutes (one real DKMS build)."""
    host = fresh_host
    inventory = host_inventory(lab, [host], tmp_path / "inv.yml")
    sources = host.root / "etc/apt/sources.list"
    listed = sources.read_text()
    sources.write_text("".join(line for line in listed.splitlines(keepends=True) if "-security" not in line))
    lists = host.run_inside(RETRIED_UPDATE, timeout=600)  # the image's own lists know the security suite
    assert lists.returncode == 0, lists.stdout + lists.stderr
    interrupt_dpkg(host, inventory, tmp_path)

    check = run_cli("provision", "-i", str(inventory), *GPU_NODE, "--check")
    assert check.code == 0, check.output
    assert "repair the interrupted package manager first" in check.output and "hello:" in check.output, check.output
    first = run_cli("provision", "-i", str(inventory), *GPU_NODE, "--json-report", str(tmp_path / "r1.json"),
                    timeout=1800)
    assert first.code == 0, first.output
    assert host.run_inside("dpkg --audit").stdout.strip() == ""
    built = newest_kernel(host)
    assert f"{built}, x86_64: installed" in host.run_inside("dkms status").stdout

    sources.write_text(listed)  # a newer kernel from the security suite, without its headers
    # The flavour's metapackages bring the newer kernel with its headers, and DKMS builds the module at once (the
    # good path). The fault is a kernel that came without them (an unattended upgrade of a host that holds only the
    # running kernel's headers): made here by taking the new kernel's headers and module away again.
    upgraded = host.run_inside("apt-get -q update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "
                               "--no-install-recommends --only-upgrade linux-image-cloud-amd64 "
                               "linux-headers-cloud-amd64", timeout=900)
    assert upgraded.returncode == 0, upgraded.stdout + upgraded.stderr
    following = newest_kernel(host)
    if following == built:
        pytest.skip(f"the mirror's security suite has no kernel newer than {built} today")
    version = host.run_inside("dpkg-query -W -f='${Version}' nvidia-kernel-dkms | sed 's/-[^-]*$//'").stdout.strip()
    taken = host.run_inside(f"dkms remove nvidia-current/{version} -k {following} && DEBIAN_FRONTEND=noninteractive "
                            f"apt-get remove -y -q linux-headers-{following} linux-headers-cloud-amd64", timeout=600)
    assert taken.returncode == 0, taken.stdout + taken.stderr
    assert host.run_inside(f"test -e /lib/modules/{following}/build").returncode != 0  # no headers
    assert f"{following}, x86_64: installed" not in host.run_inside("dkms status").stdout

    verify = run_cli("verify-gpu", "-i", str(inventory), host.name, "--json")
    findings = {f["id"]: f for f in json.loads(verify.stdout)["findings"]}
    assert "dkms-next-boot-kernel" in findings, verify.stdout
    assert following in json.dumps(findings["dkms-next-boot-kernel"]), findings["dkms-next-boot-kernel"]

    plan = run_cli("provision", "-i", str(inventory), *GPU_NODE, "--check", "--json-report", str(tmp_path / "c.json"))
    assert plan.code == 0, plan.output
    host_report = json.loads((tmp_path / "c.json").read_text())["hosts"][0]
    summaries = [a["summary"] for s in host_report["steps"] for a in s["actions"]]
    assert f"install linux-headers-{following} and build the nvidia-current DKMS module for kernel {following}" \
        in summaries, summaries
