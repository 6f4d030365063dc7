"""A Slurm node drained and resumed with Slurm's own client on the node (`scontrol`, `squeue`)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from gpunode.connection import Connection, ExecResult
from gpunode.errors import GpunodeError

# squeue's fields: job id, user, name, time left (%i %u %j %L); `|` never appears in a job id or a user name
_JOBS = "%i|%u|%j|%L"
_ACTIVE = "RUNNING,COMPLETING,SUSPENDED"  # what still holds the node's GPUs


@dataclass
class SlurmDrainer:
    """The node's Slurm name, or "" for the host's short hostname (Slurm's usual NodeName)."""

    node: str = ""

    @property
    def describe(self) -> str:
        return f"slurm node {self.node}" if self.node else "slurm node (the host's short hostname)"

    @property
    def _name(self) -> str:
        return shlex.quote(self.node) if self.node else '"$(hostname -s)"'

    def drain(self, conn: Connection, reason: str) -> None:
        self._update(conn, f"State=DRAIN Reason={shlex.quote(reason)}", "drain")

    def hold(self, conn: Connection, reason: str) -> None:
        self._update(conn, f"State=DRAIN Reason={shlex.quote(reason)}", "hold drained")

    def resume(self, conn: Connection) -> None:
        self._update(conn, "State=RESUME", "resume")

    def running(self, conn: Connection) -> list[str]:
        result = conn.run(f"squeue -h -w {self._name} -t {_ACTIVE} -o '{_JOBS}'", label="slurm: jobs on the node")
        _check(result, "list the node's jobs", conn.name)
        return [describe_job(line) for line in result.stdout.splitlines() if line.strip()]

    def _update(self, conn: Connection, change: str, what: str) -> None:
        result = conn.run(f"scontrol update NodeName={self._name} {change}", label=f"slurm: {what}")
        _check(result, what, conn.name)


def describe_job(line: str) -> str:
    """One squeue line (`%i|%u|%j|%L`) for a person: "job 42 (alice: train-llm, 0:12:00 left)"."""
    job, user, name, left = (line.split("|", 3) + ["", "", ""])[:4]
    return f"job {job} ({user}: {name}, {left} left)"


def _check(result: ExecResult, what: str, host: str) -> None:
    if not result.ok:
        raise GpunodeError(f"slurm: could not {what} (exit {result.exit_code}): {result.tail(4)}", host=host,
                           step=f"slurm {what}",
                           fix="check that slurmd's node has Slurm's client and munge key (scontrol ping), that "
                           "slurm_node_name is the node's Slurm name (scontrol show node), and that the run is root")
