"""The boot-time acceptance unit on a real systemd (a lab host, Debian 12): installed by the `accept_at_boot` step
through `gpunode provision`, it orders before kubelet and slurmd (`systemctl list-dependencies --before`), and across
real reboots a failing acceptance program leaves both agents stopped ("Dependency failed") while a passing one lets
them start after it. The acceptance program and the agents are stand-ins (a shell script with a chosen exit status,
sleep units named kubelet.service and slurmd.service): what is under test is systemd's handling of the unit."""

from __future__ import annotations

import time
from pathlib import Path

from tests.conftest import host_inventory, run_cli

PLAYBOOK = "name: accept\nhosts: all\nsteps:\n  - name: boot-time acceptance unit\n    accept_at_boot: {mode: auto}\n"
STAND_INS = r"""
mkdir -p /usr/local/libexec/gpunode
printf '#!/bin/sh\necho "accept stand-in: exit $(cat /etc/accept-rc)" >&2\nexit $(cat /etc/accept-rc)\n' \
    > /usr/local/libexec/gpunode/accept
chmod +x /usr/local/libexec/gpunode/accept
for agent in kubelet slurmd; do
    printf '[Unit]\nDescription=stand-in %s\n[Service]\nExecStart=/bin/sleep infinity\n' "$agent" \
        > /etc/systemd/system/$agent.service
    printf '[Install]\nWantedBy=multi-user.target\n' >> /etc/systemd/system/$agent.service
done
systemctl daemon-reload && systemctl enable kubelet.service slurmd.service
"""


def inside(host, command: str) -> str:
    return host.run_inside(command, timeout=120).stdout.strip()


def reboot(host) -> None:
    before = inside(host, "cat /proc/sys/kernel/random/boot_id")
    host.run_inside("systemctl reboot")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        time.sleep(2)
        try:
            now = inside(host, "cat /proc/sys/kernel/random/boot_id")
        except Exception:  # the container is between boots
            continue
        if now and now != before:
            inside(host, "systemctl is-system-running --wait")
            return
    raise AssertionError(f"{host.name} did not come back from its reboot")


def test_a_failed_acceptance_keeps_the_agents_down_across_a_reboot(lab, fresh_host, tmp_path: Path):
    inside(fresh_host, "echo 1 > /etc/accept-rc")
    assert fresh_host.run_inside(STAND_INS).returncode == 0
    inventory = host_inventory(lab, [fresh_host], tmp_path / "inv.yml")
    playbook = tmp_path / "accept.yml"
    playbook.write_text(PLAYBOOK)
    result = run_cli("provision", "-i", str(inventory), "--playbook", str(playbook))
    assert result.code == 0, result.output
    again = run_cli("provision", "-i", str(inventory), "--playbook", str(playbook), "--check")
    assert again.code == 0 and "would-change" not in again.output, again.output  # idempotent

    before = inside(fresh_host, "systemctl list-dependencies --before --plain gpunode-accept-boot.service")
    assert {"kubelet.service", "slurmd.service"} <= {line.strip() for line in before.splitlines()}

    reboot(fresh_host)
    assert inside(fresh_host, "systemctl is-active gpunode-accept-boot.service kubelet.service slurmd.service; "
                              "true").split() == ["failed", "inactive", "inactive"]
    journal = inside(fresh_host, "journalctl -b --no-pager -u kubelet.service -u slurmd.service")
    assert "Dependency failed for kubelet.service" in journal and "Dependency failed for slurmd.service" in journal

    inside(fresh_host, "echo 0 > /etc/accept-rc")
    reboot(fresh_host)
    assert inside(fresh_host, "systemctl is-active gpunode-accept-boot.service kubelet.service slurmd.service; "
                              "true").split() == ["active", "active", "active"]
    done = int(inside(fresh_host, "systemctl show -P ExecMainExitTimestampMonotonic gpunode-accept-boot.service"))
    for agent in ("kubelet.service", "slurmd.service"):
        started = int(inside(fresh_host, f"systemctl show -P ExecMainStartTimestampMonotonic {agent}"))
        assert started >= done, f"{agent} started before the acceptance check ended"
