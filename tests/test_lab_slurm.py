"""Slurm itself as the consumer: a real cluster of lab hosts (Debian 12's slurmctld/slurmd, Slurm 22.05) runs jobs,
gpunode's drain waits for a running job to end (DRAINING, then DRAINED), `sacct` shows the job COMPLETED, and the
bound names the running job when it is hit."""

from __future__ import annotations

import re
import shlex
import time

import pytest

from gpunode.schedulers import slurm

pytestmark = pytest.mark.lab


def submit(cluster, node: str, seconds: int, name: str = "train") -> str:
    """A batch job of the lab user on `node`; its id once it runs."""
    command = shlex.join(["sbatch", "--parsable", "-w", node, "-J", name, "--wrap", f"sleep {seconds}"])
    result = cluster.sh(cluster.controller, f"cd /tmp && su gpunode -c {shlex.quote(command)}")
    assert result.code == 0, result.stderr
    job = result.stdout.strip().split(";")[0]
    wait_for(lambda: cluster.ctl(["squeue", "-h", "-j", job, "-o", "%T"]).stdout.strip() == "RUNNING", 20,
             f"job {job} running")
    return job


def wait_for(predicate, timeout: float, what: str, poll: float = 0.25):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def completion_records(cluster, job: str) -> list[dict[str, str]]:
    """The job's records in slurmctld's job completion file, through `sacct --completion` (sacct 22.05 refuses
    plain queries with accounting_storage/none: src/sacct/options.c:1043-1048)."""
    result = cluster.ctl(["sacct", "--completion", "-n", "-P", "-j", job, "-o", "JobID,JobName,User,State,End"])
    assert result.code == 0, result.stderr
    keys = ("JobID", "JobName", "User", "State", "End")
    return [dict(zip(keys, line.split("|"), strict=True)) for line in result.stdout.splitlines() if line.strip()]


def test_cluster_starts_fast_and_sacct_sees_a_job(slurm_cluster):
    cluster = slurm_cluster
    assert cluster.timings["total_s"] < 30, cluster.timings
    version = cluster.ctl(["scontrol", "--version"]).stdout
    assert version.startswith("slurm-wlm 22.05."), version  # Debian names its build slurm-wlm
    config = cluster.ctl(["scontrol", "show", "config"]).stdout  # what slurmctld loaded from gpunode's slurm.conf
    for key, value in (("ProctrackType", "proctrack/linuxproc"), ("TaskPlugin", "task/none"),
                       ("JobCompType", "jobcomp/filetxt"), ("AccountingStorageType", "accounting_storage/none"),
                       ("JobAcctGatherType", "jobacct_gather/linux")):
        assert re.search(rf"^{key}\s+= {value}$", config, re.M), (key, config)
    plain = cluster.ctl(["sacct"])  # what a user types first: Slurm says why, and --completion is the answer
    assert "accounting storage is disabled" in plain.stderr
    job = submit(cluster, cluster.nodes[1].name, 2, name="hello")
    records = wait_for(lambda: completion_records(cluster, job), 20, f"job {job} in sacct")
    assert [(r["JobID"], r["JobName"], r["User"], r["State"]) for r in records] == \
        [(job, "hello", "gpunode(1000)", "COMPLETED")]  # the jobcomp record keeps the uid


def test_drain_waits_for_the_running_job_then_resume(slurm_cluster):
    cluster = slurm_cluster
    node = cluster.nodes[0].name
    job = submit(cluster, node, 8)

    state = slurm.drain(cluster.ctl, node, "driver 535 -> 550 (rolling change)")
    assert state.draining and not state.drained, state
    assert state.state == "ALLOCATED+DRAIN"
    assert state.reason == "gpunode: change: driver 535 -> 550 (rolling change)" and state.reason_user == "root"

    with pytest.raises(slurm.DrainTimeout) as bound:  # the bound hit while the job runs names it
        slurm.wait_drained(cluster.ctl, node, timeout_s=1, poll_s=0.5)
    assert [(j.job_id, j.user, j.name, j.state) for j in bound.value.jobs] == [(job, "gpunode", "train", "RUNNING")]
    assert re.fullmatch(r"UNLIMITED", bound.value.jobs[0].time_left)
    assert f"{job} (gpunode, 'train', RUNNING" in str(bound.value)

    seen = []
    drained = slurm.wait_drained(
        lambda argv: _observe(cluster.ctl(argv), argv, seen), node, timeout_s=60, poll_s=0.5)
    drained_at = time.time()
    assert drained.drained and drained.state == "IDLE+DRAIN", drained
    assert "DRAINING" in seen and seen[-1] == "DRAINED"  # scontrol's own view went DRAINING -> DRAINED
    assert cluster.ctl(["sinfo", "-h", "-n", node, "-o", "%T"]).stdout.strip() == "drained"

    records = completion_records(cluster, job)
    assert [(r["JobID"], r["State"]) for r in records] == [(job, "COMPLETED")]  # once: not failed, not requeued
    end = time.mktime(time.strptime(records[0]["End"], "%Y-%m-%dT%H:%M:%S"))
    assert end <= drained_at + 1  # DRAINED only after the job ended

    assert slurm.resume(cluster.ctl, node) is True
    back_in_service(cluster, node)
    assert slurm.resume(cluster.ctl, node) is False  # not drained: nothing to do


def test_resume_leaves_an_admins_drain(slurm_cluster):
    cluster = slurm_cluster
    node = cluster.nodes[1].name
    assert cluster.ctl(slurm.drain_command(node, "admin: fan 3 noisy")).code == 0
    assert slurm.resume(cluster.ctl, node) is False
    state = cluster.node(node)
    assert state.drained and state.reason == "admin: fan 3 noisy"
    assert slurm.resume(cluster.ctl, node, only_gpunode=False) is True
    back_in_service(cluster, node)


def test_reason_with_quotes_and_shell_characters_reaches_slurm_as_written(slurm_cluster):
    cluster = slurm_cluster
    node = cluster.nodes[0].name
    state = slurm.drain(cluster.ctl, node, '"GPU 0 $(reboot); `x` | y\n>z"')
    assert state.reason == "gpunode: change: GPU 0 $(reboot); `x` | y >z", state


def back_in_service(cluster, node: str) -> None:
    """IDLE again. Measured: for about half a second after RESUME, slurmctld shows IDLE+NOT_RESPONDING until the
    node answers its ping ("Node ... now responding" in slurmctld.log)."""
    wait_for(lambda: cluster.node(node).state == "IDLE", 10, f"{node} IDLE after resume")


def _observe(result: slurm.Completed, argv: list[str], seen: list[str]) -> slurm.Completed:
    """Record sinfo-style DRAINING/DRAINED of each `scontrol show node` answer the wait reads."""
    if argv[:3] == ["scontrol", "show", "node"]:
        state = slurm.parse_node(result.stdout.strip())
        seen.append("DRAINING" if state.draining else "DRAINED" if state.drained else state.state)
    return result
