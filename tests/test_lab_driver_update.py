"""Issue 37: a driver update within the branch is a change the user asks for (`driver_version`), on a real Debian 12
lab host: 535.261.03 (bookworm) installed, then 535.309.01 (bookworm-security) asked for, two real DKMS builds."""

from __future__ import annotations

import json

import pytest

from tests.conftest import host_inventory, run_cli

pytestmark = [pytest.mark.lab, pytest.mark.extended]  # two DKMS builds of the NVIDIA driver: opt-in
ONLY_DRIVER = ("--tags", "kernel,driver", "--var", "kernel_policy=upgrade", "--var", "reboot=defer")
OLD, NEW = "535.261.03", "535.309.01"  # bookworm's nvidia-kernel-dkms and bookworm-security's, 2026-11-28


def gpu_node(inventory, report, *args):
    return run_cli("provision", "-i", str(inventory), "--playbook", "playbooks/gpu-node.yml", *ONLY_DRIVER, *args,
                   "--json-report", str(report), timeout=1800)


def driver_step(report) -> dict:
    host = json.loads(report.read_text())["hosts"][0]
    return next(s for s in host["steps"] if s["name"] == "NVIDIA driver")


def test_an_update_within_the_branch_is_planned_when_asked_and_held_again(lab, fresh_host, tmp_path):
    """About 10 minutes: the host first sees only bookworm (no security suite), as a host installed before the
    security update did; with the security suite back the driver is kept until driver_version asks for 535.309.01."""
    host = fresh_host
    inventory = host_inventory(lab, [host], tmp_path / "inv.yml")
    sources = host.root / "etc/apt/sources.list"
    listed = sources.read_text()
    sources.write_text("".join(line for line in listed.splitlines(keepends=True) if "-security" not in line))
    first = gpu_node(inventory, tmp_path / "first.json")
    assert first.code == 0, first.output
    version = host.run_inside("dpkg-query -W -f='${Version}' nvidia-kernel-dkms").stdout
    assert version.startswith(f"{OLD}-"), version

    sources.write_text(listed)
    kept = gpu_node(inventory, tmp_path / "kept.json")
    assert kept.code == 0 and driver_step(tmp_path / "kept.json")["status"] == "ok", kept.output

    check = gpu_node(inventory, tmp_path / "check.json", "--check", "--var", f"driver_version={NEW}")
    assert check.code == 0, check.output
    assert "let go of the driver's holds for the update: " in check.output, check.output
    reasons = [a["reason"] for a in driver_step(tmp_path / "check.json")["actions"]]
    assert any(r.startswith(f"driver {OLD} is installed, version {NEW} is asked for") for r in reasons), reasons

    update = gpu_node(inventory, tmp_path / "update.json", "--var", f"driver_version={NEW}")
    assert update.code == 0, update.output
    versions = host.run_inside("dpkg-query -W -f='${Package} ${Version}\\n' nvidia-kernel-dkms libcuda1 "
                               "nvidia-smi libnvidia-ml1").stdout.splitlines()
    assert all(line.split()[1].startswith(f"{NEW}-") for line in versions), versions
    dkms = host.run_inside("dkms status").stdout
    assert f"nvidia-current/{NEW}" in dkms and "installed" in dkms and OLD not in dkms, dkms
    held = set(host.run_inside("apt-mark showhold").stdout.split())
    assert {"nvidia-kernel-dkms", "libcuda1", "nvidia-smi", "nvidia-modprobe"} <= held, held

    again = gpu_node(inventory, tmp_path / "again.json", "--var", f"driver_version={NEW}")
    assert again.code == 0 and driver_step(tmp_path / "again.json")["status"] == "ok", again.output
