"""A reboot that never comes back: the run ends with a clear timeout instead of waiting forever."""

from __future__ import annotations

import subprocess
import time

import pytest

from tests.conftest import host_inventory
from tests.faults.helpers import host_report, start_provision, wait_for_file_text

pytestmark = pytest.mark.lab

PLAYBOOK = """steps:
  - name: reboot it
    reboot: {if_required: false, timeout: 20}
  - name: after the reboot
    file: {path: /root/after, content: "x\\n"}
"""


def test_a_reboot_that_never_comes_back_times_out_with_a_clear_error(lab, fresh_host, tmp_path):
    """Guards: the deadline in Connection.wait_for_reboot (gpunode/connection/base.py), taken from the step's
    `timeout`. Without it the run would retry the connection forever."""
    playbook = tmp_path / "p.yml"
    playbook.write_text(PLAYBOOK)
    inventory = host_inventory(lab, [fresh_host], tmp_path / "inv.yml")
    report = tmp_path / "r.json"
    process = start_provision(inventory, playbook, report)
    log = report.with_suffix(".logs") / f"{fresh_host.name}.log"
    assert wait_for_file_text(log, "$ reboot  -> exit 0", 30), "the reboot was never sent"
    fresh_host.stop()  # the machine goes down and stays down (no supervisor to boot it again)
    started = time.monotonic()
    try:
        output, _ = process.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        process.kill()
        pytest.fail("the run kept waiting for a host that never came back")
    assert time.monotonic() - started < 60  # 20 s plus at most one last connection attempt
    assert process.returncode == 1, output
    host = host_report(report)
    assert host["status"] == "failed" and host["failed_step"] == "reboot it", host
    assert "did not come back from the reboot within 20s" in host["error"]
    assert "console" in host["fix"]  # says where to look
    assert "did not come back from the reboot within 20s" in output
    assert [s["status"] for s in host["steps"]] == ["failed"]  # the step after the reboot never ran
