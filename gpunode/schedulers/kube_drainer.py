"""A Kubernetes node drained and returned for a rolling change from the controller, through the API server, as
`kubectl drain` / `kubectl uncordon` do (gpunode/kube_drain.py: the calls, their sources, the PDB refusals)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpunode.connection import Connection
from gpunode.errors import UsageError
from gpunode.kube_drain import Api, DrainOptions, drain, uncordon


@dataclass
class KubeDrainer:
    """The node's Kubernetes name; the API from the controller's kubeconfig (read once, when first needed)."""

    node: str
    kubeconfig: str = ""
    context: str = ""
    options: DrainOptions = field(default_factory=DrainOptions)
    api: Api | None = None
    evicted: list[str] = field(default_factory=list)

    @property
    def describe(self) -> str:
        return f"kubernetes node {self.node}"

    def _api(self) -> Api:
        if self.api is None:
            from gpunode.kube_api import http_api, load_kubeconfig
            from gpunode.schedulers.errors import NotDrained

            try:
                config = load_kubeconfig(self.kubeconfig or None, self.context)
            except UsageError as exc:  # in a playbook run the kubeconfig comes from the inventory, not an option
                raise NotDrained(
                    f"{exc.cause}; this host's inventory says gpunode_scheduler: kubernetes", step="kubernetes drain",
                    fix="set kubeconfig: PATH (and kube_context: NAME) in this host's or its group's inventory vars, "
                        "or KUBECONFIG on the controller; else take gpunode_scheduler: kubernetes off this host (or "
                        "`drain: never` in the playbook). The node was not cordoned and the step that disturbs its "
                        "GPUs did not run") from None
            self.api = http_api(config)
        return self.api

    def preflight(self, conn: Connection) -> str:
        from gpunode.kube_drain import Call, node_path

        reply = self._api()(Call("GET", node_path(self.node)))
        if reply.status != 200:
            from gpunode.schedulers.errors import NotDrained

            raise NotDrained(f"kubernetes node {self.node}: GET {node_path(self.node)} answered {reply.status}",
                             step="kubernetes drain", fix="set kube_node_name to the node's name in the cluster "
                             "(kubectl get nodes), and check the kubeconfig's user may read and patch nodes")
        return "unschedulable" if (reply.body or {}).get("spec", {}).get("unschedulable") else "schedulable"

    def drain(self, conn: Connection, reason: str) -> None:
        """Cordon, evict (PodDisruptionBudgets respected, refusals retried within the bound), wait until gone."""
        self.evicted = drain(self._api(), self.node, self.options).evicted

    def running(self, conn: Connection) -> list[str]:
        return []  # drain() returned: every pod it evicts is gone (or it raised, naming them)

    def resume(self, conn: Connection) -> None:
        uncordon(self._api(), self.node)

    def hold(self, conn: Connection, reason: str) -> None:
        """It stays cordoned: nothing to send (the report and the host's log say why)."""


def kube_drainer(name: str, variables: dict[str, Any]) -> KubeDrainer:
    """From the host's inventory variables: kube_node_name (default: the inventory name), kubeconfig, kube_context."""
    return KubeDrainer(str(variables.get("kube_node_name") or name), str(variables.get("kubeconfig") or ""),
                       str(variables.get("kube_context") or ""))
