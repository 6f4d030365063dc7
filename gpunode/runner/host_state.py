"""What one host's run (runner/host_run.py `HostRun`) keeps while it goes, one small object per job: the remote
session, what steps leave for later steps, the handlers notified, the package share."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias

from gpunode.connection import Connection
from gpunode.facts import Facts
from gpunode.runner import remote_lock
from gpunode.steps import Action, StepContext
from gpunode.steps.probe import ProbeBatch
from gpunode.steps.state import HostState

Share: TypeAlias = Callable[[StepContext, Action], str]  # the package share a step's packages go through


class BeforeDisturbing(Protocol):
    """Called once a step is about to make a change that disturbs the GPUs' running work (runner/rolling.py takes
    the node out of its scheduler); in --check it only says what it would do, in `notes`. Raising GpunodeError
    fails the host before that change."""

    def __call__(self, conn: Connection, step: str, check: bool, notes: list[str]) -> None: ...


@dataclass
class Session:
    """The host's side of the run: its lock (whose session runs the probes), the probe sent along with the lock +
    facts script, and the facts as the latest step left them (None until gathered)."""

    lock: remote_lock.RunLock | None = None
    guess: ProbeBatch | None = None  # the probe guessed from the last run's facts: used (or discarded) once
    facts: Facts | None = None

    def take_guess(self) -> ProbeBatch | None:
        """The guessed probe, once: the first probe uses or discards it."""
        guess, self.guess = self.guess, None
        return guess


@dataclass
class Carried:
    """What steps leave for later steps: their `register:` results, the host state (reboot, target kernel, ...)
    and whether anything changed (a later step then probes afresh)."""

    register_names: frozenset[str]  # every `register:` name of the playbook's steps
    registered: dict[str, Any] = field(default_factory=dict)  # `register:` name -> the step's result
    unknown: set[str] = field(default_factory=set)  # --check: registered results of steps that would run (not known)
    host: HostState = field(default_factory=HostState)
    changed_something: bool = False

    def defers(self, reads: set[str]) -> bool:
        """Whether a step that reads these names reads a registered result (known only once that step ran)."""
        return bool(self.register_names & reads)

    def unknown_among(self, reads: set[str]) -> list[str]:
        """--check: the registered results among these names that come from steps that would run."""
        return sorted(self.unknown & reads)

    def register(self, name: str, result: Any, unknown: bool) -> None:
        """A step's result under its `register:` name; `unknown`: --check, and the step would run."""
        self.registered[name] = result
        if unknown:
            self.unknown.add(name)


@dataclass
class Handlers:
    """The handlers notified by changed steps (in the order first notified) and those that ran."""

    notified: list[str] = field(default_factory=list)
    ran: set[str] = field(default_factory=set)

    def notify(self, names: Iterable[str]) -> None:
        self.notified += [n for n in names if n not in self.notified]

    def pending(self) -> list[str]:
        """Notified and not run yet, in order."""
        return [n for n in self.notified if n not in self.ran]


@dataclass
class PackageShare:
    """The package share the `package_cache` variable asks for, read once per host run."""

    share: Share | None = None  # None: no share
    read: bool = False

    def once(self, make: Callable[[], Share | None]) -> Share | None:
        """The share, made by `make` the first time."""
        if not self.read:
            self.share, self.read = make(), True
        return self.share
