"""A Slurm node drained and resumed for a rolling change, through Slurm's client on the node itself
(schedulers/slurm.py: the commands, their output formats and their sources)."""

from __future__ import annotations

from dataclasses import dataclass

from gpunode.connection import Connection
from gpunode.errors import GpunodeError
from gpunode.schedulers import slurm


@dataclass
class SlurmDrainer:
    """The node's Slurm name, or "" for the host's short hostname (Slurm's usual NodeName), read once."""

    node: str = ""

    @property
    def describe(self) -> str:
        return f"slurm node {self.node}" if self.node else "slurm node (the host's short hostname)"

    def _name(self, conn: Connection) -> str:
        if not self.node:
            result = conn.run("hostname -s", sudo=False, label="slurm: the node's short hostname")
            if not result.ok or not result.stdout.strip():
                raise GpunodeError(f"could not read the short hostname: {result.tail(2)}", step="slurm drain",
                                   fix="set slurm_node_name for this host in the inventory")
            self.node = result.stdout.strip()
        return slurm.check_node_name(self.node)

    def preflight(self, conn: Connection) -> str:
        return slurm.node_state(slurm.over_connection(conn), self._name(conn)).state

    def drain(self, conn: Connection, reason: str) -> None:
        slurm.drain(slurm.over_connection(conn), self._name(conn), reason)

    def hold(self, conn: Connection, reason: str) -> None:
        slurm.drain(slurm.over_connection(conn), self._name(conn), reason)

    def resume(self, conn: Connection) -> None:
        slurm.resume(slurm.over_connection(conn), self._name(conn))

    def running(self, conn: Connection) -> list[str]:
        """Nothing once the node is DRAINED; else its jobs (or that it is still completing one)."""
        run, node = slurm.over_connection(conn), self._name(conn)
        state = slurm.node_state(run, node)
        if not state.drain:
            raise GpunodeError(f"slurm node {node} is no longer draining (State={state.state}): someone resumed it "
                               "during the change's wait", step="slurm drain", fix="run again once nobody resumes it")
        if state.drained:
            return []
        return [f"job {job.describe()}" for job in slurm.node_jobs(run, node)] or [
            f"(no job listed; the node is {state.state})"]
