"""facts.sh's `pkgmgr` and `procs` lines: who holds a package-manager lock (found through /proc/locks and open
file descriptors), and those processes' names and command lines."""

from __future__ import annotations

from typing import NamedTuple


class HolderLine(NamedTuple):
    """`holder=PATH<TAB>PID<TAB>HOW`: process PID holds (or has open) the lock file PATH."""

    path: str
    pid: int


class ProcLine(NamedTuple):
    """`proc=PID<TAB>COMM<TAB>COMMAND LINE`."""

    pid: int
    comm: str
    command: str


def parse_holder(value: str) -> HolderLine | None:
    """One `holder` value; None when its PID is not a number."""
    path, _, rest = value.partition("\t")
    pid = rest.partition("\t")[0]
    return HolderLine(path, int(pid)) if pid.isdigit() else None


def parse_proc(value: str) -> ProcLine | None:
    """One `proc` value; None when its PID is not a number."""
    pid, comm, command = (value.split("\t", 2) + ["", ""])[:3]
    return ProcLine(int(pid), comm, command) if pid.isdigit() else None
