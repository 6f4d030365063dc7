"""Two gpunode processes started together on one host: one runs, the other is refused and names the winner.

(tests/test_lab_provision.py `test_remote_lock_refuses_a_second_concurrent_run` holds the lock from the test
itself; this is a real race between two `gpunode provision` processes.)
"""

from __future__ import annotations

import pytest

from tests.conftest import host_inventory
from tests.faults.helpers import host_report, lock_is_free, start_provision

pytestmark = pytest.mark.lab

PLAYBOOK = """steps:
  - name: count this run
    command: {cmd: "echo run >> /root/runs && sleep 8"}  # long enough to overlap on a loaded machine
"""


def test_two_concurrent_runs_on_one_host_the_second_is_refused(lab, fresh_host, tmp_path):
    """Guards: the flock taken by the lock + facts exec (gpunode/runner/remote_lock.py). Without it both runs
    would go ahead and /root/runs would get two lines."""
    playbook = tmp_path / "p.yml"
    playbook.write_text(PLAYBOOK)
    inventory = host_inventory(lab, [fresh_host], tmp_path / "inv.yml")
    reports = [tmp_path / "a.json", tmp_path / "b.json"]
    processes = [start_provision(inventory, playbook, report) for report in reports]
    outputs = [p.communicate(timeout=120)[0] for p in processes]
    codes = [p.returncode for p in processes]
    assert sorted(codes) == [0, 1], outputs
    winner, loser = (0, 1) if codes[0] == 0 else (1, 0)
    refused = host_report(reports[loser])
    assert refused["status"] == "failed" and refused["failed_step"] == "lock", refused
    assert "another gpunode run holds this host's lock" in refused["error"]
    assert f"pid {processes[winner].pid} " in refused["error"]  # the holder is named: who, where, which process
    assert refused["steps"] == []  # nothing ran on the refused side
    assert host_report(reports[winner])["status"] == "changed"
    assert (fresh_host.root / "root/runs").read_text() == "run\n"  # exactly one run did the work
    assert lock_is_free(fresh_host)
