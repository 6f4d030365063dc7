"""Nothing of a run outlives it: a step's remote process ends with the run (Ctrl-C, SIGKILL, network cut, step
timeout), except a package transaction, which the host's lock then waits for; a new run in between is refused
and names what still runs. Two runs never change one host at the same time.

Guards: gpunode/connection/guard.py (each command in its own session, recorded next to the lock, stopped when
its channel closes) and gpunode/runner/remote_lock.py (the holder stops leftovers, waits for package
transactions, lets go after a silent network, and refuses runs while a recorded command lives).
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from tests.conftest import host_inventory, run_cli
from tests.faults.helpers import host_report, lock_is_free, start_provision, wait_inside, wait_lock_free

pytestmark = pytest.mark.lab

PLAYBOOK = """steps:
  - name: slow
    command: {{cmd: "{command}"{extra}}}
  - name: after
    file: {{path: /root/after, content: "x\\n"}}
"""

# The second run proves it never overlaps the first: its step fails if the first run's command still runs.
CHECK = """steps:
  - name: alone
    command: {{cmd: "! pgrep -f '^{command}$' && touch /root/second"}}
"""


def _running(host, command: str) -> bool:
    return host.run_inside(f"pgrep -f '^{command}$'").returncode == 0


def _start(lab, host, tmp_path, command: str, extra: str = "", env: dict | None = None):
    playbook = tmp_path / "p.yml"
    playbook.write_text(PLAYBOOK.format(command=command, extra=extra))
    inventory = host_inventory(lab, [host], tmp_path / "inv.yml")
    report = tmp_path / "r.json"
    process = start_provision(inventory, playbook, report, env=env)
    assert wait_inside(host, "ps -eo args", command), "the slow step never started"
    return process, inventory, report


def _second_run_is_alone_or_refused(host, inventory, tmp_path, command: str) -> str:
    """Right after the first run ended: a second run either runs alone or is refused naming what still runs."""
    playbook = tmp_path / "check.yml"
    playbook.write_text(CHECK.format(command=command))
    second = run_cli("provision", "-i", str(inventory), "--playbook", str(playbook), "--log-dir", str(tmp_path / "l2"))
    if second.code == 0:
        assert (host.root / "root/second").exists()
        return "alone"
    assert second.code == 1, second.output
    assert "holds this host's lock" in second.output and "still running there: step 'slow'" in second.output, (
        second.output)
    assert command in second.output, second.output
    return "refused"


def test_a_step_timeout_ends_the_remote_command(lab, fresh_host, tmp_path):
    """Issue 15 item 11: `timeout: 3` used to report "timed out" while the command ran on for 30 s."""
    command = "sleep 30.1"
    process, _, report = _start(lab, fresh_host, tmp_path, command, extra=", timeout: 3")
    output, _ = process.communicate(timeout=60)
    assert process.returncode == 1, output
    assert "timed out after 3s" in host_report(report)["error"]
    assert not _running(fresh_host, command), "the timed-out command still runs on the host"
    assert lock_is_free(fresh_host)


def test_ctrl_c_during_a_command_leaves_nothing_running(lab, fresh_host, tmp_path):
    command = "sleep 30.2"
    process, inventory, report = _start(lab, fresh_host, tmp_path, command)
    os.kill(process.pid, signal.SIGINT)
    output, _ = process.communicate(timeout=60)
    assert process.returncode == 1, output
    assert host_report(report)["status"] == "cancelled"
    assert not _running(fresh_host, command), "the interrupted command still runs on the host"
    assert lock_is_free(fresh_host)
    assert not (fresh_host.root / "root/after").exists()
    assert _second_run_is_alone_or_refused(fresh_host, inventory, tmp_path, command) == "alone"


def test_sigkill_of_the_controller_leaves_nothing_running_or_is_named(lab, fresh_host, tmp_path):
    command = "sleep 30.3"
    process, inventory, _ = _start(lab, fresh_host, tmp_path, command)
    os.kill(process.pid, signal.SIGKILL)
    process.communicate(timeout=30)
    _second_run_is_alone_or_refused(fresh_host, inventory, tmp_path, command)
    assert wait_lock_free(fresh_host, 30)
    assert not _running(fresh_host, command)


def test_network_cut_leaves_nothing_running_or_is_named(lab, fresh_host, tmp_path):
    """After a cut the host's sshd never hears that the controller is gone: the lock holder notices the missing
    heartbeat instead (GPUNODE_DEAD_PEER_SECONDS=4 here: the holder lets go after 10 s of silence)."""
    command = "sleep 30.4"
    process, inventory, _ = _start(lab, fresh_host, tmp_path, command, env={"GPUNODE_DEAD_PEER_SECONDS": "4"})
    lab.network.cut(fresh_host.name)
    try:
        output, _ = process.communicate(timeout=45)
    finally:
        lab.network.cut(fresh_host.name, down=False)
    assert process.returncode == 1, output
    outcome = _second_run_is_alone_or_refused(fresh_host, inventory, tmp_path, command)
    if outcome == "refused":  # the holder lets go within its heartbeat timeout and stops the command
        assert wait_lock_free(fresh_host, 30)
        assert not _running(fresh_host, command)
        assert _second_run_is_alone_or_refused(fresh_host, inventory, tmp_path, command) == "alone"


def test_ctrl_c_during_an_apt_install_waits_for_dpkg_and_names_it(lab, fresh_host, tmp_path):
    """A package transaction is never killed: after Ctrl-C while dpkg installs a real package, the lock stays
    held until dpkg ends; the console says apt still runs (issue 27: only the JSON did); a new run waits for it,
    saying so (GPUNODE_LEFTOVER_WAIT=0: refused at once, naming the step and command); dpkg finishes cleanly."""
    # dpkg's own post-invoke hook keeps the dpkg process (and its transaction) alive for 6 s: a sure window.
    (fresh_host.root / "etc/dpkg/dpkg.cfg.d/slow").write_text('post-invoke="sleep 6.5"\n')
    playbook = tmp_path / "p.yml"
    playbook.write_text("steps:\n  - name: slow\n    packages: {names: [hello], cache_valid_time: 0}\n")
    inventory = host_inventory(lab, [fresh_host], tmp_path / "inv.yml")
    report = tmp_path / "r.json"
    process = start_provision(inventory, playbook, report)
    deadline = time.monotonic() + 300
    while "sleep 6.5" not in fresh_host.run_inside("ps -eo args").stdout:
        assert process.poll() is None and time.monotonic() < deadline, f"dpkg never ran: {process.communicate()}"
        time.sleep(0.1)
    os.kill(process.pid, signal.SIGINT)
    output, _ = process.communicate(timeout=60)
    assert process.returncode == 1, output
    host = host_report(report)
    assert host["status"] == "cancelled"
    assert fresh_host.run_inside("pgrep -x dpkg").returncode == 0, "dpkg was killed mid-transaction"
    assert "still running on the host" in " ".join(host["notes"]) and "apt-get" in " ".join(host["notes"])
    said = " ".join(output.split())  # the console says it (rich may wrap long lines)
    assert "the package manager still runs on the host and is never killed" in said, output
    assert "still running on the host" in said and "apt-get" in said
    assert "every step is idempotent" in said and "a new run waits for it" in said
    assert not lock_is_free(fresh_host)
    check = tmp_path / "check.yml"
    check.write_text("steps:\n  - command: {cmd: 'touch /root/second'}\n")
    refused = run_cli("provision", "-i", str(inventory), "--playbook", str(check), "--log-dir", str(tmp_path / "l2"),
                      env={"GPUNODE_LEFTOVER_WAIT": "0"})
    assert refused.code == 1 and "still running there: step 'slow'" in refused.output, refused.output
    assert "apt-get" in refused.output and "install -- hello" in refused.output
    assert not (fresh_host.root / "root/second").exists()
    second = run_cli("provision", "-i", str(inventory), "--playbook", str(check), "--log-dir", str(tmp_path / "l2"))
    assert second.code == 0, second.output
    assert "waiting for an earlier run's package transaction to end" in second.output and "apt-get" in second.output
    assert (fresh_host.root / "root/second").exists()
    assert wait_lock_free(fresh_host, 120)
    assert fresh_host.run_inside("dpkg --audit").stdout.strip() == ""
    (fresh_host.root / "etc/dpkg/dpkg.cfg.d/slow").unlink()
    rerun = run_cli("provision", "-i", str(inventory), "--playbook", str(playbook), "--json-report",
                    str(tmp_path / "r3.json"), "--log-dir", str(tmp_path / "l3"))
    assert rerun.code == 0, rerun.output
    assert host_report(tmp_path / "r3.json")["changed"] == 0  # hello was installed whole by the first run



def test_dpkg_killed_mid_install_is_repaired_by_the_next_run(lab, fresh_host, tmp_path):
    """Must-show 2: dpkg SIGKILLed while it installs a real package leaves "dpkg was interrupted"; the next
    run's facts see it, its plan says so, the packages step repairs it first and converges."""
    hook = fresh_host.root / "etc/dpkg/dpkg.cfg.d/slow"
    hook.write_text('post-invoke="sleep 6.6"\n')  # a sure window in which dpkg runs
    first = tmp_path / "first.yml"
    first.write_text("steps:\n  - packages: {names: [hello], cache_valid_time: 0}\n")
    inventory = host_inventory(lab, [fresh_host], tmp_path / "inv.yml")
    process = start_provision(inventory, first, tmp_path / "r1.json")
    assert wait_inside(fresh_host, "ps -eo args", "sleep 6.6", timeout=300), "dpkg never ran"
    pid = fresh_host.run_inside("pgrep -xo dpkg").stdout.strip()
    assert pid.isdigit()
    fresh_host.run_inside(f"kill -KILL {pid}")
    output, _ = process.communicate(timeout=120)
    assert process.returncode == 1, output
    hook.unlink()
    assert fresh_host.run_inside("dpkg --audit").stdout.strip(), "the kill did not leave dpkg interrupted"
    playbook = tmp_path / "p.yml"
    playbook.write_text("steps:\n  - name: tools\n    packages: {names: [jq]}\n")
    check = run_cli("provision", "-i", str(inventory), "--playbook", str(playbook), "--check", "--log-dir",
                    str(tmp_path / "lc"))
    assert "repair the interrupted package manager first" in check.output, check.output
    assert "hello:" in check.output  # names the package left half-way
    second = run_cli("provision", "-i", str(inventory), "--playbook", str(playbook), "--json-report",
                     str(tmp_path / "r2.json"), "--log-dir", str(tmp_path / "l2"))
    assert second.code == 0, second.output
    actions = [a["summary"] for a in host_report(tmp_path / "r2.json")["steps"][0]["actions"]]
    assert actions[0].startswith("repair the interrupted package manager"), actions
    assert fresh_host.run_inside("dpkg --audit").stdout.strip() == ""
    assert "ii  hello" in fresh_host.run_inside("dpkg -l hello").stdout
    third = run_cli("provision", "-i", str(inventory), "--playbook", str(playbook), "--json-report",
                    str(tmp_path / "r3.json"), "--log-dir", str(tmp_path / "l3"))
    assert third.code == 0 and host_report(tmp_path / "r3.json")["changed"] == 0, third.output
