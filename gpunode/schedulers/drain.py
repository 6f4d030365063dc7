"""The drain protocol a rolling run uses, and which scheduler a host is in (its inventory variables).

A host's scheduler is named by `gpunode_scheduler` (`slurm`, `kubernetes` or `none`) in the inventory (usually in a
group's vars); `slurm_node_name` gives the node's Slurm name when it is not the host's short hostname;
`kube_node_name` the Kubernetes node's name when it is not the inventory name, `kubeconfig` and `kube_context` the
controller's kubeconfig (default: $KUBECONFIG, then ~/.kube/config; its current context).
"""

from __future__ import annotations

from typing import Any, Protocol

from gpunode.connection import Connection
from gpunode.errors import UsageError

SCHEDULERS = ("slurm", "kubernetes", "none")


class Drainer(Protocol):
    """One node in its scheduler. Every call runs through the node's own connection (Slurm's client and munge key
    are on every slurmd node, and root there may change node states) and raises GpunodeError on failure."""

    @property
    def describe(self) -> str:
        """How reports name the node: "slurm node gpu1"."""
        ...

    def preflight(self, conn: Connection) -> str:
        """--check: read the node's state as the drain would (nothing changes); its state, or the error the drain
        would meet."""
        ...

    def drain(self, conn: Connection, reason: str) -> None:
        """Take the node out: no new work lands; running work goes on. `reason` says why (the step); the scheduler's
        form marks it as a change's drain, which only the change lifts."""
        ...

    def running(self, conn: Connection) -> list[str]:
        """The work still running on the node, each item described for a person (id, user, name, time left)."""
        ...

    def resume(self, conn: Connection) -> None:
        """Put the node back."""
        ...

    def hold(self, conn: Connection, reason: str) -> None:
        """Keep the node out with this reason (its change or gate failed)."""
        ...


def drainer_for(name: str, variables: dict[str, Any]) -> Drainer | None:
    """The host's drainer from its variables; None when it is in no scheduler. A wrong name is refused (exit 2)."""
    scheduler = str(variables.get("gpunode_scheduler") or "none")
    if scheduler not in SCHEDULERS:
        raise UsageError(f"{name}: gpunode_scheduler is {scheduler!r}, not one of {', '.join(SCHEDULERS)}",
                         fix="set gpunode_scheduler: slurm or kubernetes in the group's vars (or none); "
                         "slurm_node_name / kube_node_name where the node's name differs")
    if scheduler == "slurm":
        from gpunode.schedulers.slurm_drain import SlurmDrainer

        return SlurmDrainer(str(variables.get("slurm_node_name") or ""))
    if scheduler == "kubernetes":
        from gpunode.schedulers.kube_drainer import kube_drainer

        return kube_drainer(name, variables)
    return None
