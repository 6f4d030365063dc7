"""A rolling run's Kubernetes drain (runner/rolling.py with schedulers/kube_drainer.py): the real HostRun on a
stand-in host, the API calls answered by the stand-in API server (tests/kube_api_standin.py, its rules sourced from
kubectl and the API server's eviction code). The node is cordoned and its pods evicted just before the first change
that disturbs its GPUs, and uncordoned after the gate passed; a PodDisruptionBudget that never allows the eviction
fails the host before the change, names the budget, and uncordons the node."""

from __future__ import annotations

import threading

from gpunode.inventory import Host
from gpunode.kube_drain import DrainOptions
from gpunode.playbook import load_playbook
from gpunode.runner.events import NoEvents
from gpunode.runner.host_run import HostRun
from gpunode.runner.run import host_rollouts
from gpunode.schedulers.drain import drainer_for
from gpunode.schedulers.kube_drainer import KubeDrainer
from tests.kube_api_standin import StandIn
from tests.run_cases import OS_RELEASE_DIR
from tests.standin import Reply, StandinConnection, minimal_facts

BOOK = """serial: 1
steps:
  - name: prepare
    command: {cmd: "echo prepare"}
  - name: reboot
    reboot: {if_required: false}
gate:
  - name: driver answers
    command: {cmd: "echo gate"}
"""
CLUSTER = {"node": {"name": "gpu-1"}, "daemonsets": ["kube-system/nvidia-device-plugin-daemonset"],
           "pods": [{"name": "train-0", "owner": "StatefulSet/train", "labels": {"app": "train"}},
                    {"name": "nvidia-device-plugin-daemonset-x1", "namespace": "kube-system",
                     "owner": "DaemonSet/nvidia-device-plugin-daemonset"}]}


def rolled(tmp_path, cluster, options=None, check=False):
    book = tmp_path / "rolling.yml"
    book.write_text(BOOK)
    playbook = load_playbook(book)
    host = Host(name="gpu-1", address="192.0.2.1", vars={"gpunode_scheduler": "kubernetes"})
    os_release = (OS_RELEASE_DIR / "debian-12.txt").read_text()
    replies = [Reply(label="run: echo prepare"), Reply(label="run: echo gate"),
               Reply(label="rollback snapshot: NVIDIA packages before the change", stdout="manager apt\n")]
    conn = StandinConnection(host.name, lambda boot: minimal_facts(os_release, {}, boot), replies,
                             threading.Event())
    rollout = host_rollouts(playbook, [host])[host.name]
    api = StandIn.from_case(cluster)
    assert isinstance(rollout.drainer, KubeDrainer)
    rollout.drainer.api, rollout.drainer.options = api, options or DrainOptions()
    rollout.sleep, rollout.clock = (lambda _s: None), (lambda: 0.0)
    run = HostRun(host, conn, playbook, {}, check, NoEvents(), threading.Event())
    return rollout.run(run), api


def lines(api) -> list[str]:
    return [call.line() for call in api.calls]


def test_cordon_and_evict_come_just_before_the_change_and_uncordon_after_the_gate(tmp_path):
    outcome, api = rolled(tmp_path, CLUSTER)
    assert outcome.status == "changed", (outcome.error, outcome.notes)
    assert [s.name for s in outcome.steps] == ["prepare", "reboot", "gate: driver answers"]
    calls = lines(api)
    assert calls[:2] == ["GET /api/v1/nodes/gpu-1", "PATCH /api/v1/nodes/gpu-1"]  # cordon
    assert "POST /api/v1/namespaces/default/pods/train-0/eviction" in calls
    assert not any("nvidia-device-plugin" in c and c.startswith("POST") for c in calls)  # the DaemonSet pod stays
    assert calls[-2:] == ["GET /api/v1/nodes/gpu-1", "PATCH /api/v1/nodes/gpu-1"]  # uncordon, after the gate
    assert not api.node["spec"].get("unschedulable")
    ran = [c["label"] for c in outcome.commands if c["new_session"]]
    assert ran.index("run: echo prepare") < ran.index("reboot") < ran.index("run: echo gate")  # prepare ran first
    assert outcome.rollout["drain_before"] == "reboot" and "resumed" in outcome.rollout


def test_a_budget_that_never_allows_the_eviction_fails_the_host_before_the_change(tmp_path):
    cluster = {**CLUSTER, "pdbs": [{"name": "train-pdb", "match": {"app": "train"}, "desired": 1, "current": 1,
                                    "allowed": 0}]}
    outcome, api = rolled(tmp_path, cluster, DrainOptions(max_attempts=3, retry_delay=0))
    assert outcome.status == "failed" and outcome.failed_step == "reboot"
    assert "train-pdb" in outcome.error, outcome.error
    assert "reboot" not in [c["label"] for c in outcome.commands]  # nothing was changed
    assert not api.node["spec"].get("unschedulable")  # and the node was uncordoned
    assert "resumed" in outcome.rollout


def test_a_kubernetes_host_takes_its_node_name_and_kubeconfig_from_the_inventory():
    drainer = drainer_for("node-a", {"gpunode_scheduler": "kubernetes", "kube_node_name": "ip-10-0-0-7.ec2.internal",
                                     "kubeconfig": "/etc/kube/admin.conf", "kube_context": "prod"})
    assert isinstance(drainer, KubeDrainer)
    assert (drainer.node, drainer.kubeconfig, drainer.context) == ("ip-10-0-0-7.ec2.internal", "/etc/kube/admin.conf",
                                                                   "prod")
    assert drainer.describe == "kubernetes node ip-10-0-0-7.ec2.internal"


def test_no_readable_kubeconfig_fails_before_the_change_naming_the_inventory_vars(tmp_path):
    """As on lab hosts with gpunode_scheduler: kubernetes and no kubeconfig: the fix names the inventory variables
    (provision has no --kubeconfig option) and does not ask to resume a node that was never cordoned."""
    book = tmp_path / "rolling.yml"
    book.write_text(BOOK)
    playbook = load_playbook(book)
    missing = tmp_path / "absent" / "config"
    host = Host(name="gpu-1", address="192.0.2.1", vars={"gpunode_scheduler": "kubernetes",
                                                         "kubeconfig": str(missing)})
    os_release = (OS_RELEASE_DIR / "debian-12.txt").read_text()
    replies = [Reply(label="run: echo prepare"),
               Reply(label="rollback snapshot: NVIDIA packages before the change", stdout="manager apt\n")]
    conn = StandinConnection(host.name, lambda boot: minimal_facts(os_release, {}, boot), replies,
                             threading.Event())
    rollout = host_rollouts(playbook, [host])[host.name]
    run = HostRun(host, conn, playbook, {}, False, NoEvents(), threading.Event())
    outcome = rollout.run(run)
    assert outcome.status == "failed" and outcome.failed_step == "reboot"
    assert f"kubeconfig {missing}: cannot read it (FileNotFoundError)" in outcome.error
    assert "kubeconfig: PATH" in outcome.fix and "--kubeconfig" not in outcome.fix
    assert "resume it by hand" not in outcome.fix and "was not cordoned" in outcome.fix
    assert "reboot" not in [c["label"] for c in outcome.commands]  # nothing disturbing ran


def test_check_mode_reads_the_node_as_the_drain_would_and_changes_nothing(tmp_path):
    outcome, api = rolled(tmp_path, CLUSTER, check=True)
    assert outcome.status == "would-change", (outcome.error, outcome.notes)
    assert lines(api) == ["GET /api/v1/nodes/gpu-1"]  # no cordon, no eviction
    assert any("would drain kubernetes node gpu-1 (schedulable now) before 'reboot'" in n for n in outcome.notes)


def test_check_mode_names_a_node_the_cluster_does_not_have(tmp_path):
    outcome, api = rolled(tmp_path, {**CLUSTER, "node": {"name": "gpu-9"}}, check=True)
    assert outcome.status == "failed" and outcome.failed_step == "reboot"
    assert "GET /api/v1/nodes/gpu-1 answered 404" in outcome.error and "kube_node_name" in outcome.fix
