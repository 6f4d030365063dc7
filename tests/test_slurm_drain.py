"""gpunode.schedulers.slurm on what Slurm 22.05 printed on the lab cluster (tests/data/slurm/SOURCES.md), with the
format rules from Slurm's source (cited in the module); the same calls run against Slurm itself in
tests/test_lab_slurm.py."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from gpunode.errors import GpunodeError, UsageError
from gpunode.schedulers import slurm
from gpunode.schedulers.slurm_conf import SLURM_CONF_KEYS, ClusterConf, healthcheck_lines

LAB = json.loads((Path(__file__).parent / "data" / "slurm" / "lab_22.05.8.json").read_text())


def test_node_states_read_from_scontrol_lines() -> None:
    idle = slurm.parse_node(LAB["idle"])
    assert (idle.name, idle.state, idle.drain, idle.reason) == ("hs-h201", "IDLE", False, "")
    busy = slurm.parse_node(LAB["allocated"])
    assert busy.state == "ALLOCATED" and not busy.drain
    draining = slurm.parse_node(LAB["allocated_drain"])
    assert draining.state == "ALLOCATED+DRAIN" and draining.draining and not draining.drained
    assert (draining.reason, draining.reason_user, draining.reason_time) == \
        ("gpunode: driver 535 -> 550", "root", "2026-11-29T04:57:51")
    assert draining.drained_by_gpunode
    drained = slurm.parse_node(LAB["idle_drain"])
    assert drained.state == "IDLE+DRAIN" and drained.drained and not drained.draining


@pytest.mark.parametrize(("state", "draining"), [
    ("IDLE+COMPLETING+DRAIN", True),     # node_state_string: COMPLETING with DRAIN is DRAINING
    ("MIXED+DRAIN", True),
    ("DOWN+DRAIN+NOT_RESPONDING", False),
    ("IDLE+DRAIN+MAINTENANCE", False),
])
def test_draining_follows_node_state_string(state: str, draining: bool) -> None:
    line = LAB["idle_drain"].replace("State=IDLE+DRAIN", f"State={state}")
    node = slurm.parse_node(line)
    assert node.draining is draining and node.drained is (not draining)


def test_reason_with_brackets_spaces_and_a_trailing_comment() -> None:
    line = LAB["idle_drain"].replace(
        "Reason=gpunode: driver 535 -> 550 [root@2026-11-29T04:57:51]",
        "Reason=admin: [rack 3] PSU swap [alice@2026-11-29T04:57:51] Comment=ticket 42")
    node = slurm.parse_node(line)
    assert (node.reason, node.reason_user) == ("admin: [rack 3] PSU swap", "alice")
    assert not node.drained_by_gpunode


def test_not_a_node_line_is_an_error() -> None:
    with pytest.raises(ValueError, match="not a `scontrol show node -o` line"):
        slurm.parse_node("Node hs-h9 not found")


def test_jobs_from_squeue_keep_a_name_with_the_separator() -> None:
    [job] = slurm.parse_jobs(LAB["squeue"])
    assert (job.job_id, job.user, job.state, job.time_left, job.name) == \
        ("1", "gpunode", "RUNNING", "1:29:59", "train | step 1")
    assert job.describe() == "1 (gpunode, 'train | step 1', RUNNING, time left 1:29:59)"
    [unlimited] = slurm.parse_jobs(LAB["squeue_unlimited"])
    assert unlimited.time_left == "UNLIMITED"
    assert slurm.parse_jobs("") == []
    with pytest.raises(ValueError):
        slurm.parse_jobs("1 gpunode RUNNING")


def test_commands_are_argv_with_one_reason_argument() -> None:
    argv = slurm.drain_command("gpu-01", 'gpunode: "GPU 0\tXid 79"\n$(reboot)')
    assert argv == ["scontrol", "update", "NodeName=gpu-01", "State=DRAIN",
                    'Reason=gpunode: "GPU 0 Xid 79" $(reboot)']
    assert shlex.split(shlex.join(argv)) == argv  # over SSH: one word each, nothing expanded
    assert slurm.resume_command("gpu-01") == ["scontrol", "update", "NodeName=gpu-01", "State=RESUME"]
    assert slurm.jobs_command("gpu-01") == ["squeue", "-h", "-w", "gpu-01", "-o", "%i|%u|%T|%L|%j"]
    assert slurm.show_node_command("gpu-01") == ["scontrol", "show", "node", "-o", "gpu-01"]


@pytest.mark.parametrize("bad", ["", "gpu-[01-04]", "gpu-01,gpu-02", "a b", "-w", "x;reboot"])
def test_only_single_node_names(bad: str) -> None:
    with pytest.raises(UsageError, match="not a single Slurm node name"):
        slurm.drain_command(bad, "x")


def test_an_empty_reason_is_refused_before_slurm_refuses_it() -> None:
    with pytest.raises(UsageError, match="empty drain reason"):
        slurm.drain_command("gpu-01", ' "" \n')


class Replay:
    """Slurm's answers in order (lab captures), and a clock that moves only when the wait sleeps."""

    def __init__(self, nodes: list[str]) -> None:
        self.nodes, self.now, self.calls = nodes, 0.0, []

    def run(self, argv: list[str]) -> slurm.Completed:
        self.calls.append(argv)
        if argv[0] == "squeue":
            return slurm.Completed(0, LAB["squeue"])
        return slurm.Completed(0, self.nodes.pop(0) if len(self.nodes) > 1 else self.nodes[0])

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_wait_returns_once_drained() -> None:
    replay = Replay([LAB["allocated_drain"], LAB["allocated_drain"], LAB["idle_drain"]])
    state = slurm.wait_drained(replay.run, "hs-h201", timeout_s=60, poll_s=5, clock=lambda: replay.now,
                               sleep=replay.sleep)
    assert state.drained and replay.now == 10


def test_wait_bound_names_the_running_jobs() -> None:
    replay = Replay([LAB["allocated_drain"]])
    with pytest.raises(slurm.DrainTimeout) as hit:
        slurm.wait_drained(replay.run, "hs-h201", timeout_s=12, poll_s=5, clock=lambda: replay.now,
                           sleep=replay.sleep)
    assert replay.now == 12 and [j.job_id for j in hit.value.jobs] == ["1"]
    text = str(hit.value)
    assert "node hs-h201 still draining after 12s; running jobs: 1 (gpunode, 'train | step 1', RUNNING, " \
           "time left 1:29:59)" in text and "fix:" in text


def test_wait_on_a_node_nobody_drains_says_so() -> None:
    replay = Replay([LAB["allocated"]])
    with pytest.raises(GpunodeError, match="not draining"):
        slurm.wait_drained(replay.run, "hs-h201", timeout_s=5, clock=lambda: replay.now, sleep=replay.sleep)


def test_a_failing_command_names_it_and_the_fix() -> None:
    def refuse(argv: list[str]) -> slurm.Completed:
        return slurm.Completed(1, "", "slurm_update error: Invalid node name specified")

    with pytest.raises(GpunodeError, match="Invalid node name specified") as failed:
        slurm.drain(refuse, "gpu-01", "x")
    assert "scontrol ping" in str(failed.value)


def test_conf_keys_all_have_their_man_page_line_and_render() -> None:
    conf = ClusterConf("lab", ("ctl", "10.0.0.1"), [("n1", "10.0.0.2"), ("n2", "10.0.0.3")],
                       healthcheck=healthcheck_lines(30))
    text = conf.render()
    written = {word.split("=", 1)[0] for line in text.splitlines() if not line.startswith("#")
               for word in line.split() if "=" in word}
    assert written <= set(SLURM_CONF_KEYS), written - set(SLURM_CONF_KEYS)
    assert "HealthCheckProgram=/usr/local/libexec/gpunode/slurm-healthcheck\nHealthCheckInterval=30\n" \
           "HealthCheckNodeState=IDLE\n" in text
    with pytest.raises(ValueError, match="0 disables"):
        healthcheck_lines(0)


def test_over_a_gpunode_connection_each_argument_stays_one_word() -> None:
    from gpunode.connection.local import LocalConnection
    from gpunode.connection.transcript import Transcript
    from gpunode.inventory import Host

    run = slurm.over_connection(LocalConnection(Host(name="localhost", address="127.0.0.1", local=True),
                                                Transcript("localhost")), sudo=False)
    result = run(["printf", "%s|", "NodeName=n1", "Reason=gpunode: GPU 0 $(reboot); `x`"])
    assert (result.code, result.stdout) == (0, "NodeName=n1|Reason=gpunode: GPU 0 $(reboot); `x`|")


def test_drain_for_a_change_is_marked_so_the_health_check_leaves_it() -> None:
    sent: list[list[str]] = []

    def run(argv: list[str]) -> slurm.Completed:
        sent.append(argv)
        return slurm.Completed(0, LAB["allocated_drain"] if argv[1] == "show" else "")

    slurm.drain(run, "hs-h201", "driver 535 -> 550")
    slurm.drain(run, "hs-h201", "gpunode: GPU 0 lost")  # already gpunode's: kept as given
    assert [argv[-1] for argv in sent if argv[1] == "update"] == \
        ["Reason=gpunode: change: driver 535 -> 550", "Reason=gpunode: GPU 0 lost"]
