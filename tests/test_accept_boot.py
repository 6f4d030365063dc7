"""The boot-time acceptance unit (gpunode/steps/accept_boot.py) checked by systemd's own tools here:
`systemd-analyze verify` reads it as systemd would, and `systemctl --root` enables it offline, which must put it in
kubelet's, slurmd's and the ECS agent's .requires/ (RequiredBy=). tests/test_accept_boot_lab.py boots it."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from gpunode.steps.accept_boot import AGENTS, UNIT, unit_text

needs_systemd = pytest.mark.skipif(not shutil.which("systemd-analyze") or not shutil.which("systemctl"),
                                   reason="systemd's tools are not installed")


@needs_systemd
def test_systemd_analyze_verify_accepts_the_unit(tmp_path):
    program = tmp_path / "accept"
    program.write_text("#!/bin/sh\nexit 0\n")
    program.chmod(0o755)
    unit = tmp_path / UNIT
    unit.write_text(unit_text(program=str(program)))
    result = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True)
    assert result.returncode == 0 and result.stderr == "", result.stderr


@needs_systemd
def test_systemd_analyze_verify_catches_a_misspelt_directive(tmp_path):
    """The check is not blind: a key systemd does not know is reported (the first draft had one)."""
    unit = tmp_path / UNIT
    unit.write_text(unit_text(program="/bin/true").replace("[Service]", "ConditionPathIsExecutable=/bin/true\n\n"
                                                                         "[Service]"))
    result = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True)
    assert "Unknown key 'ConditionPathIsExecutable'" in result.stderr


@needs_systemd
def test_enabling_puts_it_in_each_agents_requires(tmp_path):
    folder = tmp_path / "etc/systemd/system"
    folder.mkdir(parents=True)
    (folder / UNIT).write_text(unit_text())
    result = subprocess.run(["systemctl", f"--root={tmp_path}", "enable", UNIT], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    for agent in AGENTS:
        link = folder / f"{agent}.requires" / UNIT
        assert link.is_symlink() and str(link.readlink()) == f"/etc/systemd/system/{UNIT}"
    assert (folder / "multi-user.target.wants" / UNIT).is_symlink()


def test_the_unit_orders_before_the_agents_and_fails_closed():
    text = unit_text()
    lines = text.splitlines()
    assert f"Before={' '.join(AGENTS)}" in lines and f"RequiredBy={' '.join(AGENTS)}" in lines
    assert "Type=oneshot" in lines and "RemainAfterExit=yes" in lines
    assert "ExecStart=/usr/local/libexec/gpunode/accept --tier quick --format text" in lines
    assert not any(line.startswith("Condition") for line in lines)  # a missing program fails, never skips
