"""gpunode's HealthCheckProgram (scripts/slurm_healthcheck.sh) run by slurmd itself on a real lab cluster (Debian 12's
Slurm 22.05): a miss drains the node with the finding as reason, a later pass resumes it, an admin's drain is left
alone, "could not judge" changes nothing, and slurmd runs the program at its start, before it registers.

The node-side acceptance program is a stand-in at its installed path (the real `accept --tier quick --format slurm`
is another module's; the contract is one line, exit 0 pass / 1 fail / 2 could not judge): it answers what the test
put in a file, and records each call with the SLURMD_NODENAME it was given, so the calls are slurmd's, not ours."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from gpunode.schedulers import slurm
from gpunode.schedulers.slurm_conf import HEALTHCHECK_PATH, healthcheck_lines
from tests.test_lab_slurm import wait_for

pytestmark = pytest.mark.lab

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "slurm_healthcheck.sh"
ACCEPT = "/usr/local/libexec/gpunode/accept"
VERDICT = "var/lib/gpunode-test/verdict"   # line 1: exit code; line 2: the line to print
CALLS = "var/lib/gpunode-test/calls"
STAND_IN = f"""#!/bin/sh
# stand-in for gpunode's accept (issue 38): answers from /{VERDICT}, records each call
echo "$(date +%s.%N) node=${{SLURMD_NODENAME:-unset}} args=$*" >> /{CALLS}
[ -r /{VERDICT} ] || {{ echo pass; exit 0; }}
sed -n 2p /{VERDICT}
exit "$(head -n 1 /{VERDICT})"
"""
FINDING = "GPU 0 (00000000:3B:00.0) no CUDA context: Xid 79 fell off the bus"


def install(host) -> None:
    """The health check and the stand-in, installed on a node's disk."""
    for path, text in ((HEALTHCHECK_PATH, SCRIPT.read_text()), (ACCEPT, STAND_IN)):
        target = host.root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        target.chmod(0o755)
    (host.root / CALLS).parent.mkdir(parents=True, exist_ok=True)


def verdict(host, code: int, line: str) -> None:
    (host.root / VERDICT).write_text(f"{code}\n{line}\n")


def calls(host) -> list[str]:
    path = host.root / CALLS
    return path.read_text().splitlines() if path.exists() else []


def next_calls(host, count: int = 2, timeout: float = 20) -> None:
    """Wait until slurmd has run the check `count` more times on `host`."""
    before = len(calls(host))
    wait_for(lambda: len(calls(host)) >= before + count, timeout, f"{count} health checks on {host.name}")


def test_slurmd_runs_the_check_periodically_drain_resume_admin_and_could_not_judge(slurm_cluster_factory):
    cluster = slurm_cluster_factory(healthcheck=healthcheck_lines(interval_s=2))
    bad, good = cluster.nodes
    config = cluster.ctl(["scontrol", "show", "config"]).stdout  # what slurmctld loaded from gpunode's lines
    assert re.search(rf"^HealthCheckProgram\s+= {HEALTHCHECK_PATH}$", config, re.M), config
    assert re.search(r"^HealthCheckInterval\s+= 2 sec$", config, re.M)
    assert re.search(r"^HealthCheckNodeState\s+= IDLE$", config, re.M)
    for host in cluster.nodes:
        install(host)
    verdict(bad, 1, FINDING)

    # a miss: slurmd runs the program, which drains its own node with the finding as reason
    state = wait_for(lambda: (s := cluster.node(bad.name)).drain and s, 20, f"{bad.name} drained")
    assert state.reason == f"gpunode: {FINDING}" and state.reason_user == "root", state
    assert all(f"node={bad.name} args=--tier quick --format slurm" in c for c in calls(bad))  # slurmd's env, args
    slurmd_log = cluster.sh(bad, "cat /var/log/slurm/slurmd.log").stdout
    assert f"health_check failed: rc:1 output:slurm-healthcheck[{bad.name}]: fail: {FINDING}; draining" in slurmd_log
    assert not cluster.node(good.name).drain and calls(good)  # the passing node ran it too and stays in service

    # a pass later resumes it (the drained node is IDLE+DRAIN: HealthCheckNodeState=IDLE still runs it)
    verdict(bad, 0, "")
    wait_for(lambda: not cluster.node(bad.name).drain, 20, f"{bad.name} resumed")

    # an admin's drain is never lifted by a pass, and a miss does not overwrite its reason
    assert cluster.ctl(slurm.drain_command(bad.name, "admin: replacing fan 3")).code == 0
    next_calls(bad)
    verdict(bad, 1, FINDING)
    next_calls(bad)
    state = cluster.node(bad.name)
    assert state.drain and state.reason == "admin: replacing fan 3", state
    assert "node already offline (drain) for another reason (admin: replacing fan 3): left as it is" in \
        cluster.sh(bad, "tail -n 5 /var/log/slurm/slurmd.log").stdout

    # a rolling change's drain is gpunode's, but a pass does not lift it: only the change's gate does
    slurm.drain(cluster.ctl, good.name, "driver 535 -> 550")
    next_calls(good)
    state = cluster.node(good.name)
    assert state.drain and state.reason == "gpunode: change: driver 535 -> 550", state
    assert slurm.resume(cluster.ctl, good.name) is True
    wait_for(lambda: cluster.node(good.name).state == "IDLE", 10, f"{good.name} back")

    # exit 2, could not judge: the node is not drained
    verdict(good, 2, "nvidia-smi did not answer in 10s")
    next_calls(good)
    assert not cluster.node(good.name).drain
    log = cluster.sh(good, "cat /var/log/slurm/slurmd.log").stdout
    assert "health_check failed: rc:2 output:slurm-healthcheck" in log


def test_slurmd_runs_the_check_at_its_start(slurm_cluster_factory):
    # slurmd runs the program once it has started, before its registration thread (src/slurmd/slurmd/slurmd.c:389-397
    # at slurm-22-05-8-1). An hour between periodic runs, counted from slurmctld's start
    # (src/slurmctld/controller.c:1990 sets last_health_check_time = now): a drain seconds after slurmd restarts is
    # that run.
    cluster = slurm_cluster_factory(compute=1, healthcheck=healthcheck_lines(interval_s=3600))
    node = cluster.nodes[0]
    install(node)
    verdict(node, 1, FINDING)
    assert not cluster.node(node.name).drain and not calls(node)
    started = time.time()
    cluster.restart_slurmd(node)
    state = wait_for(lambda: (s := cluster.node(node.name)).drain and s, 15, f"{node.name} drained at start")
    assert state.reason == f"gpunode: {FINDING}"
    [call] = calls(node)
    assert float(call.split()[0]) >= started and f"node={node.name}" in call
    log = cluster.sh(node, "cat /var/log/slurm/slurmd.log").stdout.splitlines()
    restart = max(i for i, line in enumerate(log) if "slurmd started on" in line)
    checked = next(i for i, line in enumerate(log) if i > restart and "health_check failed: rc:1" in line)
    assert checked > restart


def test_run_by_hand_names_the_node_like_nhc_and_takes_another_program(slurm_cluster):
    cluster = slurm_cluster
    node = cluster.nodes[0]
    install(node)
    other = node.root / "usr/local/bin/other-accept"
    other.write_text(f"#!/bin/sh\necho 'NCCL all_reduce 80 GB/s < 228'\necho \"$*\" >> /{CALLS}\nexit 1\n")
    other.chmod(0o755)
    result = cluster.sh(node, f"{HEALTHCHECK_PATH} --accept /usr/local/bin/other-accept")
    assert result.code == 1, result
    assert result.stdout.strip() == f"slurm-healthcheck[{node.name}]: fail: NCCL all_reduce 80 GB/s < 228; draining"
    assert cluster.node(node.name).reason == "gpunode: NCCL all_reduce 80 GB/s < 228"
    missing = cluster.sh(node, f"GPUNODE_ACCEPT=/nonexistent {HEALTHCHECK_PATH}")
    assert missing.code == 2 and "could not judge: /nonexistent is not installed" in missing.stdout
    assert cluster.node(node.name).drain  # unchanged


def test_gpunode_installs_the_real_quick_tier_and_slurmd_drains_a_node_without_a_driver(slurm_cluster_factory,
                                                                                        lab, tmp_path):
    """The whole chain with nothing stood in: `gpunode provision` writes the real runner (scripts/accept_node.py) and
    the wrapper with the `acceptance_program` step; slurmd runs the wrapper by itself; the runner's quick tier finds
    no NVIDIA driver on the lab host (the truth: there is none) and the node is drained with that finding as its
    reason. A second run changes nothing."""
    from tests.conftest import host_inventory, run_cli

    cluster = slurm_cluster_factory(compute=1, healthcheck=healthcheck_lines(interval_s=2))
    (node,) = cluster.nodes
    inventory = host_inventory(lab, [node], tmp_path / "inventory.yml")
    book = tmp_path / "accept.yml"
    book.write_text("steps:\n  - acceptance_program: {slurm_healthcheck: true, expect_gpus: 8}\n")
    installed = run_cli("provision", "-i", str(inventory), "--playbook", str(book))
    assert installed.code == 0, installed.output
    report = tmp_path / "again.json"
    again = run_cli("provision", "-i", str(inventory), "--playbook", str(book), "--json-report", str(report))
    assert again.code == 0 and json.loads(report.read_text())["hosts"][0]["status"] == "ok", again.output
    state = wait_for(lambda: (s := cluster.node(node.name)).drain and s, 30, f"{node.name} drained by slurmd's check")
    assert state.reason.startswith("gpunode: gpunode quick nvidia-smi: nvidia-smi is not installed"), state
    log = cluster.sh(node, "cat /var/log/slurm/slurmd.log").stdout
    assert "health_check failed: rc:1" in log, log[-2000:]
