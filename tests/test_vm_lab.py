"""The opt-in VM suite (`pytest -m vm`): a qemu VM (TCG) with a real Debian 12 kernel on the lab's bridge.

What containers cannot show: the real running kernel and its headers, a real NFS mount (issue #5) that
survives a real reboot, and the reboot step's check of the kernel that came back. One VM for the module;
qemu is installed when missing (root), else the suite is skipped (failed with GPUNODE_REQUIRE_LAB=1).
"""

from __future__ import annotations

import atexit
import json
import os
import re
import time
import uuid
from pathlib import Path

import pytest
import yaml

from tests.conftest import CliResult, run_cli
from tests.vm_support import require_vms, timings_reporter

pytestmark = pytest.mark.vm

VM_INDEX = 100  # address .110 on the lab subnet, far from lab hosts (.11 up) and the NFS server (.250)
TIMINGS: dict[str, float] = {}


@pytest.fixture(scope="module")
def vm(lab, request):
    """One running VM on the lab's bridge for the module; destroyed at the end, on failure and at exit."""
    from gpunode.lab.vm import VmHost
    from gpunode.lab.vm_image import ensure_vm_image

    require_vms()
    started = time.monotonic()
    image = ensure_vm_image()
    TIMINGS["VM image ready (built once, then cached)"] = time.monotonic() - started
    host = VmHost.on_lab(lab.network, lab.directory, VM_INDEX, image, lab.key_path)
    atexit.register(host.destroy)
    request.addfinalizer(timings_reporter(request, TIMINGS, "vm suite"))
    try:
        host.start()
        TIMINGS["boot to SSH"] = host.wait_for_ssh(timeout=300)
        yield host
    finally:
        host.destroy()
        atexit.unregister(host.destroy)


@pytest.fixture
def inventory(vm, tmp_path) -> Path:
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump({"all": {"hosts": {vm.name: vm.inventory_entry()}}}))
    return path


def gpunode(*args: str, report: Path, timeout: float = 600) -> tuple[CliResult, dict]:
    """Run the CLI with a JSON report (logs beside it); returns the result and the one host's report."""
    report.unlink(missing_ok=True)
    result = run_cli(*args, "--json-report", str(report), "--log-dir", str(report.parent / "logs"),
                     timeout=timeout)
    hosts = json.loads(report.read_text())["hosts"] if report.exists() else [{}]
    return result, hosts[0]


def provision(inventory: Path, tmp_path: Path, steps: str) -> tuple[CliResult, dict]:
    playbook = tmp_path / "playbook.yml"
    playbook.write_text(f"name: vm\nsteps:\n{steps}")
    return gpunode("provision", "-i", str(inventory), "--playbook", str(playbook), report=tmp_path / "run.json")


def timed(what: str, started: float) -> None:
    TIMINGS[what] = time.monotonic() - started


def test_boots_to_ssh_with_a_real_debian_kernel(vm, inventory, tmp_path):
    assert TIMINGS["boot to SSH"] < 180
    result = run_cli("facts", "-i", str(inventory), vm.name, "--json", timeout=120)
    assert result.code == 0, result.output
    facts = json.loads(result.stdout)
    kernel = facts["kernel"]
    assert re.fullmatch(r"6\.1\.0-\d+-cloud-amd64", kernel["running"]), kernel
    assert kernel["running"] == vm.image.kernel_release != os.uname().release
    assert kernel["installed"] == [kernel["running"]]
    assert kernel["running_headers_present"] is False and kernel["headers"] == []
    assert (facts["os"]["id"], facts["os"]["version_id"]) == ("debian", "12")
    assert facts["hostname"] == vm.name

    impostor = tmp_path / "known_hosts"  # another ed25519 key for the VM's address: must be refused
    impostor.write_text(f"{vm.address} {' '.join(vm.client_key.with_suffix('.pub').read_text().split()[:2])}\n")
    entry = {**vm.inventory_entry(), "known_hosts": str(impostor)}
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {vm.name: entry}}}))
    refused = run_cli("facts", "-i", str(inventory), vm.name, timeout=120,
                      env={"GPUNODE_KNOWN_HOSTS": str(tmp_path / "gpunode_known_hosts")})
    assert refused.code != 0 and "SSH host key CHANGED" in refused.output, refused.output


def test_nfs_share_mounts_for_real_converges_and_survives_a_reboot(vm, nfs_server, inventory, tmp_path):
    args = ("mount-nfs", vm.name, "-i", str(inventory), "--server", nfs_server.address, "--export",
            nfs_server.export, "--path", "/mnt/shared", "--nfs-version", "4.1")
    started = time.monotonic()
    first, report = gpunode(*args, report=tmp_path / "first.json")
    timed("mount-nfs, first run", started)
    assert first.code == 0 and report["status"] == "changed", first.output

    def live_mount() -> list[str]:
        found = vm.ssh("findmnt -n -o FSTYPE,SOURCE,OPTIONS /mnt/shared")
        assert found.returncode == 0, f"/mnt/shared is not mounted: {found.stderr}"
        return found.stdout.split()

    fstype, source, options = live_mount()
    assert (fstype, source) == ("nfs4", f"{nfs_server.address}:/export")
    assert {"vers=4.1", "hard", "proto=tcp"} <= set(options.split(","))
    token = uuid.uuid4().hex
    written = vm.ssh(f"echo {token} > /mnt/shared/from-vm-{token}.txt")
    assert written.returncode == 0, written.stderr
    assert (nfs_server.export_dir / f"from-vm-{token}.txt").read_text() == token + "\n"
    (nfs_server.export_dir / f"from-lab-{token}.txt").write_text("from the lab\n")
    assert vm.ssh(f"cat /mnt/shared/from-lab-{token}.txt").stdout == "from the lab\n"

    fstab = vm.ssh("cat /etc/fstab").stdout
    started = time.monotonic()
    second, report = gpunode(*args, report=tmp_path / "second.json")
    timed("mount-nfs, second run", started)
    assert second.code == 0 and report["status"] == "ok" and report["changed"] == 0, second.output
    assert report["exec_count"] == 1  # lock + facts + the batched probe, one session: nothing else
    assert vm.ssh("cat /etc/fstab").stdout == fstab

    boots = vm.boots()
    started = time.monotonic()
    result, report = provision(inventory, tmp_path, "  - reboot: {if_required: false, timeout: 300}\n")
    timed("reboot through gpunode", started)
    assert result.code == 0 and [s["status"] for s in report["steps"]] == ["changed"], result.output
    assert vm.boots() == boots + 1  # the kernel really booted again (serial console)
    assert live_mount()[:2] == ["nfs4", f"{nfs_server.address}:/export"]
    assert vm.ssh(f"cat /mnt/shared/from-vm-{token}.txt").stdout == token + "\n"


def test_a_share_that_is_down_at_boot_never_holds_the_boot(vm, lab, inventory, tmp_path):
    """issue 27: gpunode's default fstab line (nofail, a mount timeout) for a NAS that does not answer; a real kernel
    boots to multi-user, remote-fs.target is reached, and the mount simply is not there."""
    dead = lab.network.address(241)  # no NAS there
    args = ("mount-nfs", vm.name, "-i", str(inventory), "--server", dead, "--export", "/export", "--path", "/mnt/down",
            "--fstab-only", "--no-preflight")
    written, report = gpunode(*args, report=tmp_path / "line.json")
    assert written.code == 0, written.output
    assert ",nofail,x-systemd.mount-timeout=30 0 0" in vm.ssh("grep ' /mnt/down ' /etc/fstab").stdout
    boots = vm.boots()
    started = time.monotonic()
    result, report = provision(inventory, tmp_path, "  - reboot: {if_required: false, timeout: 300}\n")
    timed("reboot with the NAS down", started)
    assert result.code == 0, result.output
    assert vm.boots() == boots + 1
    states = vm.ssh("systemctl is-active multi-user.target remote-fs.target").stdout.split()
    assert states == ["active", "active"], vm.ssh("systemctl --failed --no-pager").stdout
    failed = vm.ssh("journalctl -b _PID=1 -o cat --no-pager | grep -i 'dependency failed for.*remote file'").stdout
    assert failed == ""
    assert vm.ssh("findmnt /mnt/down").returncode != 0  # not mounted: the NAS is down
    removed, _ = gpunode(*args, "--absent", report=tmp_path / "removed.json")
    assert removed.code == 0, removed.output


@pytest.mark.slow  # 2.5 to 4 minutes: dpkg unpacks the headers and gcc under emulation
def test_reboot_step_finds_the_expected_kernel_running_after_a_real_reboot(vm, inventory, tmp_path):
    """kernel_headers installs the running kernel's headers and names it the target; the reboot checks it."""
    boots = vm.boots()
    started = time.monotonic()
    result, report = provision(inventory, tmp_path, "  - kernel_headers: {policy: require}\n"
                                                    "  - reboot: {if_required: false, timeout: 300}\n")
    timed("headers install + reboot", started)
    assert result.code == 0, result.output
    assert [(s["kind"], s["status"]) for s in report["steps"]] == [("kernel_headers", "changed"),
                                                                   ("reboot", "changed")], result.output
    assert report["steps"][0]["actions"][0]["summary"] == f"install linux-headers-{vm.image.kernel_release}"
    assert vm.boots() == boots + 1
    facts = json.loads(run_cli("facts", "-i", str(inventory), vm.name, "--json", timeout=120).stdout)
    assert facts["kernel"]["running"] == vm.image.kernel_release
    assert facts["kernel"]["running_headers_present"] is True
