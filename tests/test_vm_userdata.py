"""Issue #20 in the opt-in VM suite: a VM booted with `gpunode user-data` through NoCloud converges on its first boot.

The VM boots the lab's stand-in for Debian's genericcloud image (`gpunode/lab/cloud_image.py`: its own GRUB and
kernel, cloud-init 22.4 reading a NoCloud seed) under TCG. The seed's user-data is the script `gpunode user-data
--playbook base` wrote (the shell format; cloud-init runs a `#!` script as user data), byte for byte; the lab's
identity (host key, login key, resolvers) is its vendor-data, as a cloud keeps the two apart. (The cloud-init format
embeds the same script in 14 MB of YAML, which cloud-init parses several times in pure Python: minutes under TCG.)
The image has python3 but no pip and none of gpunode's dependencies:
everything comes from the embedded bundle. Checked over SSH after cloud-init has finished: the marker, base.yml's
effects through their consumers (dpkg, the programs, journald), and a second run that changes nothing.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import run_cli
from tests.vm_support import require_vms, timings_reporter

pytestmark = pytest.mark.vm

VM_INDEX = 102  # address .112 on the lab subnet (test_vm_lab.py uses .110, test_vm_bake.py .111)
STATE = "/var/lib/gpunode/first-boot"
CLOUD_INIT_RAN = "/var/lib/cloud/instance/scripts/part-001"  # where cloud-init keeps a user-data script it runs
JOURNAL_CAP = "64M"  # not journald's default: seen only if the playbook's line reached journald
PACKAGES = ("curl", "gnupg", "jq", "pciutils")  # base.yml's base_packages; the image has none of them
TIMINGS: dict[str, float] = {}


def inside(vm, command: str, timeout: float = 180) -> str:
    """Run as root in the VM over SSH; the command must succeed."""
    result = vm.ssh(command, timeout=timeout)
    assert result.returncode == 0, f"{command}: exit {result.returncode}\n{result.stdout[-2000:]}{result.stderr}"
    return result.stdout.strip()


def steps(report: dict) -> dict[str, str]:
    return {s["name"]: s["status"] for s in report["hosts"][0]["steps"]}


@pytest.fixture(scope="module")
def user_data(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("user-data") / "user-data"
    made = run_cli("user-data", "--playbook", "base", "--var", f"journald_max_use={JOURNAL_CAP}",
                   "--output", str(path))
    assert made.code == 0, made.output
    return path


@pytest.fixture(scope="module")
def booted(lab, user_data, request):
    """A new cloud-image VM whose NoCloud seed carries the user data; yielded once cloud-init has finished."""
    from gpunode.lab.cloud_image import ensure_cloud_image
    from gpunode.lab.vm import VmHost
    from gpunode.lab.vm_image import VmImage

    require_vms()
    request.addfinalizer(timings_reporter(request, TIMINGS, "vm user-data"))
    started = time.monotonic()
    base = ensure_cloud_image()
    TIMINGS["cloud base image ready (built once, then cached)"] = time.monotonic() - started
    vm = VmHost.on_lab(lab.network, lab.directory, VM_INDEX, VmImage(disk=base), lab.key_path,
                       user_data=user_data.read_text())
    atexit.register(vm.destroy)
    try:
        started = time.monotonic()
        vm.start()
        TIMINGS["boot to SSH"] = vm.wait_for_ssh(timeout=1200)
        # cloud-init's exit: 0 done, 1 a critical error, 2 a recoverable one (22.4: 1 for both)
        status = vm.ssh("cloud-init status --wait --long", timeout=1800)
        TIMINGS["boot to cloud-init done (first-boot provisioning included)"] = time.monotonic() - started
        yield vm, status
    finally:
        vm.destroy()
        atexit.unregister(vm.destroy)


def test_first_boot_through_nocloud_converges_base_and_leaves_its_marker(booted, user_data):
    vm, status = booted
    assert status.returncode == 0 and "status: done" in status.stdout, \
        f"{status.stdout}{status.stderr}\nconsole:\n{vm.console_tail(40)}"
    # cloud-init ran the seed's user data, byte for byte what gpunode wrote
    seen = inside(vm, "sha256sum < /var/lib/cloud/instance/user-data.txt").split()[0]
    assert seen == hashlib.sha256(user_data.read_bytes()).hexdigest()
    assert inside(vm, f"sha256sum < {CLOUD_INIT_RAN}").split()[0] == seen
    assert inside(vm, "cloud-init query instance_id").startswith(vm.name + "-")
    # nothing on the VM could have installed gpunode or its dependencies (PyYAML is cloud-init's): only the bundle
    bare = inside(vm, "python3 -m pip --version 2>&1; for m in gpunode invoke paramiko fabric; do "
                      "python3 -c \"import $m\" 2>&1; done; true")
    for missing in ("pip", "'gpunode'", "'invoke'", "'paramiko'", "'fabric'"):
        assert f"No module named {missing}" in bare, bare

    assert inside(vm, f"cat {STATE}/status") == "ok"
    result = json.loads(inside(vm, f"cat {STATE}/result.json"))
    assert result["status"] == "ok" and result["provision_exit"] == 0 and result["playbook"] == "base", result
    assert result["verify_exit"] is None  # no NVIDIA device in the VM: verify-gpu not run
    statuses = steps(json.loads(inside(vm, f"cat {STATE}/report.json")))
    assert statuses["base packages"] == "changed", statuses
    assert statuses["cap the systemd journal's disk use"] == "changed", statuses
    assert "failed" not in statuses.values(), statuses
    # run from cloud-init's runcmd, the wait for the package manager does not wait for cloud-init (that waits for it)
    log = inside(vm, f"cat {STATE}/logs/localhost.log")
    assert "run by cloud-init itself (user data): not waiting for cloud-init to finish" in log, log[-3000:]

    # the effects, through what uses them
    installed = inside(vm, "dpkg-query -W -f '${Package} ${db:Status-Status}\\n' " + " ".join(PACKAGES))
    assert sorted(installed.splitlines()) == sorted(f"{name} installed" for name in PACKAGES), installed
    assert inside(vm, "jq -n '{a: 1} | .a'") == "1"
    assert "curl" in inside(vm, "curl --version | head -1")
    assert inside(vm, "systemd-analyze cat-config systemd/journald.conf | grep '^SystemMaxUse='") == \
        f"SystemMaxUse={JOURNAL_CAP}"
    journald = inside(vm, "journalctl -b -u systemd-journald --no-pager -o cat")
    assert f"max {JOURNAL_CAP[:-1]}.0M" in journald, journald[-2000:]  # journald restarted with the cap
    assert inside(vm, "systemctl is-enabled apt-daily-upgrade.timer; true") in ("disabled", "masked")

    # logged to the console (cloud-init's output) and to the first-boot log
    assert "gpunode first boot: ok" in vm.console_path.read_text(errors="replace")
    assert "gpunode first boot: ok" in inside(vm, "cat /var/log/gpunode-first-boot.log")


def test_running_the_user_data_again_changes_nothing(booted):
    vm, status = booted
    if status.returncode != 0:
        pytest.skip("the first boot failed (see the test above)")
    started = time.monotonic()
    again = vm.ssh(f"bash {CLOUD_INIT_RAN}", timeout=900)
    TIMINGS["second run of the user data"] = time.monotonic() - started
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-2000:]
    statuses = steps(json.loads(inside(vm, f"cat {STATE}/report.json")))
    assert set(statuses.values()) <= {"ok", "skipped"}, statuses  # nothing changed
    assert inside(vm, f"cat {STATE}/status") == "ok"
    assert inside(vm, "ls -d /var/lib/gpunode/bundle-* | wc -l") == "1"  # unpacked once


def test_provisioning_the_node_over_ssh_afterwards_changes_nothing(booted, tmp_path):
    """The node a first boot converged is what `gpunode provision` over SSH would have made: 0 changed."""
    vm, status = booted
    if status.returncode != 0:
        pytest.skip("the first boot failed (see the first test)")
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {vm.name: vm.inventory_entry()}}}))
    report = tmp_path / "run.json"
    result = run_cli("provision", "-i", str(inventory), "--playbook", "base", "--var",
                     f"journald_max_use={JOURNAL_CAP}", "--json-report", str(report), "--log-dir",
                     str(tmp_path / "logs"), timeout=600)
    assert result.code == 0, result.output
    statuses = steps(json.loads(report.read_text()))
    assert set(statuses.values()) <= {"ok", "skipped"}, statuses
    assert statuses["base packages"] == "ok", statuses
