"""Slurm drain and resume: the commands, what `scontrol show node -o` and `squeue` print, and a bounded wait until
a draining node's jobs have ended. No transport here: callers hand in `run(argv) -> Completed` (SSH, local).

Output formats are Slurm 22.05's (Debian 12 ships 22.05.8), read from its source at
SchedMD/slurm@d525b6872a106d32916b33a8738f12510ec7cf04 (tag slurm-22-05-8-1); `SRC` below is that prefix.
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from gpunode.errors import GpunodeError, UsageError

SRC = "SchedMD/slurm@d525b6872a106d32916b33a8738f12510ec7cf04"
GPUNODE_REASON = "gpunode:"  # every reason gpunode sets starts so: a drain it may lift; any other is an admin's
# A drain for a change (a rolling driver or kernel change): the health check (scripts/slurm_healthcheck.sh) lifts
# gpunode's drains on a pass, but never this one, which only the change's own gate may lift.
CHANGE_REASON = "gpunode: change:"

# `squeue -h -w NODE -o FORMAT`: %i job id (src/squeue/opts.c:740), %u user (865), %T state (855), %L time left
# (774) and %j name (749) last, as it may hold the separator. No width given = the whole value (_parse_token,
# opts.c:1775-1790 leaves field_size 0; print.c:306-339 _print_str prints "%s" for width 0).
JOBS_FORMAT = "%i|%u|%T|%L|%j"

# scontrol show node: State= is node_state_string_complete(), BASE then "+FLAG" per flag
# (src/common/slurm_protocol_defs.c:3545-3556; names at lines 97-128); the node is DRAINING rather than DRAINED
# while the DRAIN flag is set with COMPLETING or base ALLOCATED/MIXED (node_state_string, lines 3602-3641).
_BUSY_BASES = ("ALLOCATED", "MIXED")
# Reason=TEXT [USER@TIME] (src/api/node_info.c:440-458); Comment= and Extra= may follow (lines 464-473).
_REASON = re.compile(r" Reason=(?P<text>.*?)(?: \[(?P<user>[^@\]\s]+)@(?P<time>[^\]\s]+)\])?"
                     r"(?: Comment=.*| Extra=.*)?$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass
class Completed:
    """What a command returned: exit code, output, errors."""

    code: int
    stdout: str
    stderr: str = ""


Run = Callable[[list[str]], Completed]


class _Result(Protocol):
    exit_code: int
    stdout: str
    stderr: str


class _Connection(Protocol):
    def run(self, command: str, *, sudo: bool | None = None, label: str | None = None) -> _Result: ...


def over_connection(connection: _Connection, sudo: bool = True) -> Run:
    """A `Run` over one of gpunode's connections (SSH or local) to a host with Slurm's client commands: each argv
    is quoted word by word (a reason stays one argument), run as root by default (scontrol update needs an
    administrator: SlurmUser or root)."""
    def run(argv: list[str]) -> Completed:
        result = connection.run(shlex.join(argv), sudo=sudo, label=f"slurm: {' '.join(argv[:3])}")
        return Completed(result.exit_code, result.stdout, result.stderr)
    return run


@dataclass
class NodeState:
    """One node as `scontrol show node -o` reports it."""

    name: str
    base: str                                # IDLE, ALLOCATED, MIXED, DOWN, ...
    flags: tuple[str, ...] = ()              # DRAIN, COMPLETING, NOT_RESPONDING, ...
    reason: str = ""
    reason_user: str = ""
    reason_time: str = ""

    @property
    def state(self) -> str:
        return "+".join((self.base, *self.flags))

    @property
    def drain(self) -> bool:
        return "DRAIN" in self.flags

    @property
    def draining(self) -> bool:
        """Drain set, work still on the node (sinfo's "draining")."""
        return self.drain and ("COMPLETING" in self.flags or self.base in _BUSY_BASES)

    @property
    def drained(self) -> bool:
        """Drain set and nothing running: safe to change (sinfo's "drained")."""
        return self.drain and not self.draining

    @property
    def drained_by_gpunode(self) -> bool:
        return self.drain and self.reason.startswith(GPUNODE_REASON)


@dataclass
class Job:
    """A job on a node, as `squeue -o JOBS_FORMAT` prints it."""

    job_id: str
    user: str
    state: str
    time_left: str                           # [D-]H:MM:SS, M:SS, UNLIMITED or NOT_SET (print.c:830-846, 362-387)
    name: str

    def describe(self) -> str:
        return f"{self.job_id} ({self.user}, {self.name!r}, {self.state}, time left {self.time_left})"


class DrainTimeout(GpunodeError):
    """The bound passed with jobs still on the node: `jobs` names them."""

    def __init__(self, node: str, jobs: list[Job], waited_s: float) -> None:
        running = "; ".join(job.describe() for job in jobs) or "none listed (the node is still COMPLETING)"
        super().__init__(f"node {node} still draining after {waited_s:.0f}s; running jobs: {running}",
                         fix=f"wait for them to end, or raise the drain bound; `scontrol update NodeName={node} "
                             "State=RESUME` returns the node to service unchanged", step="slurm drain")
        self.node, self.jobs, self.waited_s = node, jobs, waited_s


def check_node_name(node: str) -> str:
    """A single node name (not a hostlist expression, which would drain many)."""
    if not _NAME.match(node or ""):
        raise UsageError(f"not a single Slurm node name: {node!r}",
                         fix="name one node (letters, digits, '.', '_', '-'), e.g. gpu-01")
    return node


def clean_reason(reason: str) -> str:
    """One line, no control characters and no surrounding quotes: scontrol strips a leading and a trailing '"'
    (src/scontrol/update_node.c:167-179) and prints a reason's lines separately (node_info.c:443-458)."""
    text = " ".join("".join(c if c.isprintable() else " " for c in reason).split()).strip('"').strip()
    if not text:
        raise UsageError("an empty drain reason", fix="give a reason: Slurm requires one to drain "
                         "(src/scontrol/update_node.c:271-276)")
    return text


# ---- commands (argv lists: one reason is one argument, as scontrol reads it from argv) --------------------------
def drain_command(node: str, reason: str) -> list[str]:
    return ["scontrol", "update", f"NodeName={check_node_name(node)}", "State=DRAIN", f"Reason={clean_reason(reason)}"]


def resume_command(node: str) -> list[str]:
    return ["scontrol", "update", f"NodeName={check_node_name(node)}", "State=RESUME"]


def show_node_command(node: str) -> list[str]:
    return ["scontrol", "show", "node", "-o", check_node_name(node)]


def jobs_command(node: str) -> list[str]:
    return ["squeue", "-h", "-w", check_node_name(node), "-o", JOBS_FORMAT]


# ---- parsers ---------------------------------------------------------------------------------------------------
def parse_node(line: str) -> NodeState:
    """One `scontrol show node -o` line (node_info.c:178-481: "NodeName=N ... State=S ... [Reason=R [U@T]]")."""
    name = re.search(r"(?:^|\s)NodeName=(\S+)", line)
    state = re.search(r"\sState=(\S+)", line)
    if not name or not state:
        raise ValueError(f"not a `scontrol show node -o` line: {line[:120]!r}")
    base, *flags = state.group(1).split("+")
    node = NodeState(name=name.group(1), base=base, flags=tuple(flags))
    reason = _REASON.search(line.rstrip("\n"))
    if reason:
        node.reason, node.reason_user, node.reason_time = (reason.group("text"), reason.group("user") or "",
                                                           reason.group("time") or "")
    return node


def parse_jobs(text: str) -> list[Job]:
    """`squeue -h -o JOBS_FORMAT` lines; the name is last and may hold '|'."""
    jobs = []
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split("|", 4)
        if len(parts) != 5:
            raise ValueError(f"not a `squeue -o {JOBS_FORMAT}` line: {line[:120]!r}")
        jobs.append(Job(*parts))
    return jobs


# ---- actions ---------------------------------------------------------------------------------------------------
def _checked(run: Run, argv: list[str], node: str) -> Completed:
    result = run(argv)
    if result.code == 127:  # the shell's "command not found": this host has no Slurm client
        from gpunode.schedulers.errors import NotDrained

        said = (result.stderr or result.stdout).strip()
        raise NotDrained(
            f"this host has no {argv[0]} (exit 127: {said}), but its inventory says gpunode_scheduler: slurm",
            fix="install Slurm's client on it (Debian: slurm-client; slurmd nodes have it) if it is a Slurm node, "
                "else take gpunode_scheduler: slurm off this host in the inventory (or `drain: never` in the "
                "playbook); the node was not drained and the step that disturbs its GPUs did not run",
            step="slurm drain")
    if result.code != 0:
        said = (result.stderr or result.stdout).strip()
        raise GpunodeError(f"`{' '.join(argv)}` failed (exit {result.code}): {said}",
                           fix="check that slurmctld answers (`scontrol ping`) and the node exists "
                               f"(`scontrol show node {node}`)", step="slurm")
    return result


def node_state(run: Run, node: str) -> NodeState:
    return parse_node(_checked(run, show_node_command(node), node).stdout.strip().splitlines()[0])


def node_jobs(run: Run, node: str) -> list[Job]:
    return parse_jobs(_checked(run, jobs_command(node), node).stdout)


def drain(run: Run, node: str, reason: str) -> NodeState:
    """Drain `node` for a change (running jobs go on; no new ones start); the reason is prefixed
    `gpunode: change:` unless it already starts `gpunode:`."""
    text = clean_reason(reason)
    text = text if text.startswith(GPUNODE_REASON) else f"{CHANGE_REASON} {text}"
    _checked(run, drain_command(node, text), node)
    return node_state(run, node)


def resume(run: Run, node: str, only_gpunode: bool = True) -> bool:
    """Resume `node` if it is drained; with `only_gpunode`, only a drain gpunode set (never an admin's).
    True when a resume was sent."""
    state = node_state(run, node)
    if not state.drain or (only_gpunode and not state.drained_by_gpunode):
        return False
    _checked(run, resume_command(node), node)
    return True


def wait_drained(run: Run, node: str, timeout_s: float, poll_s: float = 2.0,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> NodeState:
    """Wait until the draining `node` is DRAINED (no job left); past `timeout_s`, DrainTimeout names the jobs."""
    start = clock()
    while True:
        state = node_state(run, node)
        if not state.drain:
            raise GpunodeError(f"node {node} is not draining (State={state.state})",
                               fix="drain it first; someone may have resumed it meanwhile", step="slurm drain")
        if state.drained:
            return state
        waited = clock() - start
        if waited >= timeout_s:
            raise DrainTimeout(node, node_jobs(run, node), waited)
        sleep(min(poll_s, max(timeout_s - waited, 0.0)))
