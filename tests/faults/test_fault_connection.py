"""Connection faults on real lab hosts: sshd killed during a step, the network cut in the middle of a run."""

from __future__ import annotations

import subprocess
import time

import pytest

from tests.conftest import host_inventory, run_cli
from tests.faults.helpers import host_report, start_provision, wait_inside, wait_lock_free

pytestmark = pytest.mark.lab

PLAYBOOK = """steps:
  - name: slow
    command: {{cmd: "sleep {seconds} && touch /root/slept", creates: /root/slept}}
  - name: after
    file: {{path: /root/after, content: "x\\n"}}
"""


def _converges(inventory, playbook, tmp_path) -> None:
    """A re-run succeeds and leaves the host converged: a third run changes nothing."""
    rerun = run_cli("provision", "-i", str(inventory), "--playbook", str(playbook), "--log-dir", str(tmp_path / "l2"))
    assert rerun.code == 0, rerun.output
    third = run_cli("provision", "-i", str(inventory), "--playbook", str(playbook), "--json-report",
                    str(tmp_path / "third.json"), "--log-dir", str(tmp_path / "l3"))
    assert third.code == 0, third.output
    assert host_report(tmp_path / "third.json")["changed"] == 0


def test_sshd_killed_during_a_step_fails_the_host_and_a_rerun_converges(lab, fresh_host, tmp_path):
    """Guards: a channel that closes without an exit status is reported as a lost connection on that host
    (gpunode/connection/ssh.py `_collect` + `_connection_lost`), not as "exit -1" with no reason; and the run
    lock dies with its SSH session (gpunode/runner/remote_lock.py), so the re-run is not refused."""
    playbook = tmp_path / "p.yml"
    playbook.write_text(PLAYBOOK.format(seconds=5))
    inventory = host_inventory(lab, [fresh_host], tmp_path / "inv.yml")
    report = tmp_path / "r.json"
    process = start_provision(inventory, playbook, report)
    assert wait_inside(fresh_host, "ps -eo args", "sleep 5"), "the slow step never started"
    started = time.monotonic()
    # '^sshd: gpunode' matches the session processes ("sshd: gpunode [priv]", "sshd: gpunode@notty"), not the
    # listener, and not the shell that runs pkill.
    assert fresh_host.run_inside("pkill -f '^sshd: gpunode'").returncode == 0
    output, _ = process.communicate(timeout=60)
    assert time.monotonic() - started < 20, "the run did not notice the dead session promptly"
    assert process.returncode == 1, output
    host = host_report(report)
    assert host["status"] == "failed" and host["failed_step"] == "slow", host
    assert "SSH connection was lost while the command ran" in host["error"]
    assert "connection was lost" in output and "fix:" in output
    assert not (fresh_host.root / "root/after").exists()  # nothing after the failed step ran
    assert wait_lock_free(fresh_host, 30)
    _converges(inventory, playbook, tmp_path)
    assert (fresh_host.root / "root/after").read_text() == "x\n"


def test_network_cut_mid_run_ends_the_run_instead_of_hanging(lab, fresh_host, tmp_path):
    """Guards: TCP_USER_TIMEOUT plus SSH keepalives (gpunode/connection/ssh.py `_detect_dead_peer`,
    `set_keepalive`; GPUNODE_DEAD_PEER_SECONDS shortens them here): without them a silent cut leaves the run
    waiting forever on a socket that never reports an error."""
    playbook = tmp_path / "p.yml"
    playbook.write_text(PLAYBOOK.format(seconds=15))
    inventory = host_inventory(lab, [fresh_host], tmp_path / "inv.yml")
    report = tmp_path / "r.json"
    process = start_provision(inventory, playbook, report, env={"GPUNODE_DEAD_PEER_SECONDS": "4"})
    assert wait_inside(fresh_host, "ps -eo args", "sleep 15"), "the slow step never started"
    started = time.monotonic()
    lab.network.cut(fresh_host.name)
    try:
        output, _ = process.communicate(timeout=45)
    except subprocess.TimeoutExpired:
        process.kill()
        pytest.fail("the run hung after the network cut")
    finally:
        lab.network.cut(fresh_host.name, down=False)
    assert time.monotonic() - started < 30  # keepalive every 1 s, dead after 4 s unacknowledged
    assert process.returncode == 1, output
    host = host_report(report)
    assert host["status"] == "failed" and host["failed_step"] == "slow", host
    assert "SSH connection was lost" in host["error"]
    # The orphaned remote command keeps the lock until the host's sshd learns the client is gone (its next
    # write after the network is back gets a reset); a run in between is refused, which is the safe answer.
    assert wait_lock_free(fresh_host, 60)
    _converges(inventory, playbook, tmp_path)
