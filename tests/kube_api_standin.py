"""A stand-in for the Kubernetes API server's answers to the requests a drain makes (no API server can run here).

What it answers is the API server's documented behaviour, each rule with its source:
- GET/PATCH a node; a strategic merge patch of spec.unschedulable (true sets, null clears it).
- GET /api/v1/pods?fieldSelector=spec.nodeName=N&limit=L with `continue` tokens (chunked lists).
- GET /api/v1 discovery: the pods/eviction subresource with group policy, version v1 (kubectl
  pkg/cmd/drain/drain_test.go@dee3483a:777-791 answers the same).
- POST .../pods/NAME/eviction: kubernetes/kubernetes pkg/registry/core/pod/storage/eviction.go (checkAndDecrement,
  canIgnorePDB): a pod Succeeded, Failed or Pending, or already deleting, is deleted without asking its budget; a
  pod with more than one matching PodDisruptionBudget is a 500; a budget with no disruptions allowed answers 429
  with a DisruptionBudget cause "The disruption budget NAME needs N healthy pods and has M currently"; else the
  budget's allowance drops by one and the pod is deleted (201). A PDB with an empty selector matches nothing.
- `heals_after` (cases only): the budget allows one disruption after that many refusals: another replica became
  healthy meanwhile, the case kubectl's retry exists for.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from gpunode.kube_drain import Call, Reply


def pod_object(spec: dict[str, Any]) -> dict[str, Any]:
    """A Pod from a case's short form: name, namespace, uid, owner (Kind/name or none), phase, emptyDir, mirror,
    labels, deleting."""
    meta: dict[str, Any] = {"name": spec["name"], "namespace": spec.get("namespace", "default"),
                            "uid": spec.get("uid", f"uid-{spec['name']}"), "labels": dict(spec.get("labels", {}))}
    owner = spec.get("owner", "ReplicaSet/rs")
    if owner != "none":
        kind, name = owner.split("/")
        api_version = {"DaemonSet": "apps/v1", "ReplicaSet": "apps/v1", "StatefulSet": "apps/v1",
                       "Job": "batch/v1"}.get(kind, "v1")
        meta["ownerReferences"] = [{"apiVersion": api_version, "kind": kind, "name": name, "uid": f"uid-{name}",
                                    "controller": True}]
    if spec.get("mirror"):
        meta["annotations"] = {"kubernetes.io/config.mirror": "hash"}
    if spec.get("deleting"):
        meta["deletionTimestamp"] = spec["deleting"]
    volumes = [{"name": "scratch", "emptyDir": {}}] if spec.get("emptyDir") else []
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"nodeName": spec.get("node", "gpu-1"), "containers": [{"name": "c", "image": "i"}],
                     "volumes": volumes},
            "status": {"phase": spec.get("phase", "Running")}}


@dataclass
class StandIn:
    node: dict[str, Any]
    pods: list[dict[str, Any]]
    daemonsets: set[str] = field(default_factory=set)
    pdbs: list[dict[str, Any]] = field(default_factory=list)
    eviction: str = "policy/v1"
    chunk: int = 0                 # >0: lists come in pages of this many (a continue token between)
    terminating_polls: int = 0     # GETs that still see an evicted pod before it is gone
    calls: list[Call] = field(default_factory=list)
    _gone: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_case(cls, cluster: dict[str, Any]) -> StandIn:
        node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": cluster["node"]["name"]},
                "spec": {"unschedulable": True} if cluster["node"].get("unschedulable") else {}}
        return cls(node, [pod_object(p) for p in cluster.get("pods", [])], set(cluster.get("daemonsets", [])),
                   [dict(p) for p in cluster.get("pdbs", [])], cluster.get("eviction", "policy/v1"),
                   cluster.get("chunk", 0), cluster.get("terminating_polls", 0))

    def __call__(self, call: Call) -> Reply:
        self.calls.append(call)
        url = urlsplit(call.path)
        parts = url.path.strip("/").split("/")
        if url.path == "/api/v1":
            return self._discovery()
        if parts[:3] == ["api", "v1", "nodes"]:
            return self._node(call, parts[3])
        if url.path == "/api/v1/pods":
            return self._list(parse_qs(url.query))
        if parts[:2] == ["apis", "apps"] and parts[-2] == "daemonsets":
            return Reply(200, {"kind": "DaemonSet"}) if f"{parts[4]}/{parts[6]}" in self.daemonsets else \
                Reply(404, {"kind": "Status", "code": 404, "reason": "NotFound"})
        if parts[-1] == "eviction":
            return self._evict(parts[3], parts[5], call.body)
        return self._get_pod(parts[3], parts[5])

    def _discovery(self) -> Reply:
        resources = [{"name": "pods", "kind": "Pod"}]
        if self.eviction:
            group, version = self.eviction.split("/")
            resources.append({"name": "pods/eviction", "kind": "Eviction", "group": group, "version": version})
        return Reply(200, {"kind": "APIResourceList", "groupVersion": "v1", "resources": resources})

    def _node(self, call: Call, name: str) -> Reply:
        if name != self.node["metadata"]["name"]:
            return Reply(404, {"kind": "Status", "code": 404})
        if call.method == "PATCH":
            assert call.content_type == "application/strategic-merge-patch+json"
            flag = call.body["spec"]["unschedulable"]
            self.node["spec"] = {"unschedulable": True} if flag else {}
        return Reply(200, json.loads(json.dumps(self.node)))

    def _list(self, query: dict[str, list[str]]) -> Reply:
        node = query["fieldSelector"][0].removeprefix("spec.nodeName=")
        items = [p for p in self.pods if p["spec"]["nodeName"] == node]
        start = int(query.get("continue", ["0"])[0])
        size = self.chunk or len(items) or 1
        page = items[start:start + size]
        meta = {"continue": str(start + size)} if start + size < len(items) else {}
        return Reply(200, {"kind": "PodList", "metadata": meta, "items": page})

    def _find(self, namespace: str, name: str) -> dict[str, Any] | None:
        return next((p for p in self.pods if p["metadata"]["namespace"] == namespace
                     and p["metadata"]["name"] == name), None)

    def _get_pod(self, namespace: str, name: str) -> Reply:
        key = f"{namespace}/{name}"
        if key in self._gone:
            self._gone[key] -= 1
            if self._gone[key] < 0:
                return Reply(404, {"kind": "Status", "code": 404})
        pod = self._find(namespace, name)
        return Reply(200, pod) if pod else Reply(404, {"kind": "Status", "code": 404})

    def _matching(self, pod: dict[str, Any]) -> list[dict[str, Any]]:
        labels = pod["metadata"].get("labels") or {}
        return [b for b in self.pdbs if b.get("namespace", "default") == pod["metadata"]["namespace"]
                and b.get("match") and all(labels.get(k) == v for k, v in b["match"].items())]

    def _evict(self, namespace: str, name: str, body: dict[str, Any]) -> Reply:
        assert body["kind"] == "Eviction" and body["apiVersion"] == self.eviction
        assert body["metadata"] == {"name": name, "namespace": namespace}
        pod = self._find(namespace, name)
        if pod is None or f"{namespace}/{name}" in self._gone:
            return Reply(404, {"kind": "Status", "code": 404, "reason": "NotFound"})
        ignore = pod["status"]["phase"] in ("Succeeded", "Failed", "Pending") or \
            pod["metadata"].get("deletionTimestamp")
        budgets = [] if ignore else self._matching(pod)
        if len(budgets) > 1:
            return Reply(500, {"kind": "Status", "code": 500,
                               "message": "This pod has more than one PodDisruptionBudget, which the eviction "
                                          "subresource does not support."})
        if budgets and budgets[0]["allowed"] == 0:
            pdb = budgets[0]
            if pdb.get("heals_after", -1) == 0:
                pdb["allowed"] = 1
            else:
                pdb["heals_after"] = pdb.get("heals_after", -1) - 1
                return Reply(429, {"kind": "Status", "code": 429, "reason": "TooManyRequests",
                                   "message": "Cannot evict pod as it would violate the pod's disruption budget.",
                                   "details": {"causes": [{
                                       "type": "DisruptionBudget",
                                       "message": f"The disruption budget {pdb['name']} needs {pdb['desired']} "
                                                  f"healthy pods and has {pdb['current']} currently"}]}})
        if budgets:
            budgets[0]["allowed"] -= 1
        self._gone[f"{namespace}/{name}"] = self.terminating_polls
        return Reply(201, {"kind": "Status", "status": "Success"})
