"""One host of a rolling run: out of its scheduler just before a change that disturbs its GPUs (after its running
work ended), through the play's gate, then back in; or, when the change or the gate failed, its NVIDIA packages as
they were and the node kept out with the reason.

The drain comes as late as it can: the steps before the first disturbing change (headers, package downloads, config
files) run while the node's jobs still run. A host whose run changes nothing that disturbs its GPUs is never drained.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from gpunode.connection import Connection
from gpunode.errors import GpunodeError
from gpunode.playbook import Playbook
from gpunode.playbook.rollout import Rollout
from gpunode.report.model import HostOutcome
from gpunode.runner.host_rules import account_commands
from gpunode.runner.host_run import HostRun
from gpunode.schedulers.drain import Drainer
from gpunode.schedulers.errors import NotDrained
from gpunode.steps.driver_snapshot import SNAPSHOT_COMMAND, DriverSnapshot

POLL_SECONDS = 5.0  # how often a draining node's running work is asked for


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


@dataclass
class HostRollout:
    """The rolling side of one host's run: `before_disturbing` is the HostRun's hook; `run` runs it all."""

    rollout: Rollout
    drainer: Drainer | None
    gate: Playbook | None
    poll_seconds: float = POLL_SECONDS
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    drained: bool = False
    first_disturbing: str = ""  # the step at which the first change that disturbs the GPUs came
    changing: bool = False      # that change went ahead (drained and idle, or no scheduler): a failure rolls back
    snapshot: DriverSnapshot | None = None
    record: dict[str, Any] = field(default_factory=dict)  # what happened, with times: the report's `rollout`

    @property
    def _drains(self) -> bool:
        return self.drainer is not None and self.rollout.drain != "never"

    # ---- before the change (inside the host's run) ----------------------------------------------
    def before_disturbing(self, conn: Connection, step: str, check: bool, notes: list[str]) -> None:
        """Snapshot the NVIDIA packages, drain, wait for the running work; in --check, say so once."""
        if self.first_disturbing:
            return
        self.first_disturbing = step
        if check:
            if self.drainer and self._drains:
                state = self.drainer.preflight(conn)  # what the drain would meet: no scontrol, no kubeconfig...
                notes.append(f"would drain {self.drainer.describe} ({state} now) before '{step}' (waiting up to "
                             f"{self.rollout.drain_timeout:g}s for its running jobs), and resume it after the gate")
            return
        if self.rollout.rollback:
            result = conn.run(SNAPSHOT_COMMAND, label="rollback snapshot: NVIDIA packages before the change")
            self.snapshot = DriverSnapshot.parse(result.stdout) if result.ok else None
            self.record["snapshot"] = dict(self.snapshot.installed) if self.snapshot else {}
        if not self.drainer or not self._drains:
            self.changing = True
            return
        self.record.update(drain_before=step, drain_started=_now())
        self.drained = True
        try:
            self.drainer.drain(conn, step)
            self._wait_idle(conn)
        except GpunodeError as exc:
            self._resume_unchanged(conn, exc)
            raise
        self.record["idle_at"] = _now()
        self.changing = True

    def _resume_unchanged(self, conn: Connection, exc: GpunodeError) -> None:
        """The drain or its wait failed before any change: the node goes back as it was (said when it cannot)."""
        assert self.drainer is not None
        self.drained = False
        if isinstance(exc, NotDrained):
            return  # the drain could not begin: the node was never taken out
        try:
            self.drainer.resume(conn)
            self.record["resumed"] = _now()
        except GpunodeError as failed:
            exc.fix = f"{exc.fix}; resuming the node failed too ({failed.cause}): resume it by hand"

    def _wait_idle(self, conn: Connection) -> None:
        assert self.drainer is not None
        started = self.clock()
        while True:
            jobs = self.drainer.running(conn)
            if not jobs:
                self.record["waited_seconds"] = round(self.clock() - started, 1)
                return
            if self.clock() - started >= self.rollout.drain_timeout:
                raise GpunodeError(
                    f"{self.drainer.describe} still runs {len(jobs)} job(s) after {self.rollout.drain_timeout:g}s "
                    f"of drain_timeout: {'; '.join(jobs)}", step="drain",
                    fix="let them end (or requeue them yourself) and run again, or raise drain_timeout; the node "
                    "was resumed and nothing was changed on it")
            self.sleep(self.poll_seconds)

    # ---- the whole host --------------------------------------------------------------------------
    def run(self, host_run: HostRun) -> HostOutcome:
        """The host's run with its hook set, then the gate, then back to the scheduler (or kept out, rolled back)."""
        host_run.before_disturbing = self.before_disturbing
        outcome = host_run.run()
        if host_run.check:
            if self.gate:
                outcome.notes.append(f"would run the gate ({len(self.gate.steps)} step(s)) after the run")
            return self._finish(outcome)
        conn = host_run.conn
        conn.transcript.reopen()
        # every host that did not fail, changed or not: a canary whose gate failed changes nothing when run again,
        # and must not pass its batch by that
        if not outcome.failed and self.gate:
            self._run_gate(host_run, outcome)
            conn.transcript.reopen()
        if self.drained or (outcome.failed and self.changing and self.snapshot):
            self._after(conn, outcome)
        account_commands(outcome, conn)
        conn.transcript.note(f"rollout: {self.record}")
        conn.transcript.close()
        return self._finish(outcome)

    def _run_gate(self, host_run: HostRun, outcome: HostOutcome) -> None:
        assert self.gate is not None
        gate = HostRun(host_run.host, host_run.conn, self.gate, host_run.extra_vars, False, host_run.events,
                       host_run.cancel, max_diff_size=host_run.max_diff_size)
        result = gate.run()
        outcome.steps += [replace(s, name=f"gate: {s.name}") for s in result.steps]
        self.record["gate"] = "passed" if not result.failed else "failed"
        if result.failed:
            outcome.status = "failed"
            outcome.failed_step = f"gate: {result.failed_step}" if result.failed_step else "gate"
            outcome.error = f"the gate failed: {result.error}"
            outcome.fix = result.fix or "see the gate's step above and the host log"

    def _after(self, conn: Connection, outcome: HostOutcome) -> None:
        """Back in the scheduler after a pass; else the packages back and the node kept out with the reason."""
        try:
            conn.open()
            if not outcome.failed:
                if self.drainer:
                    self.drainer.resume(conn)
                    self.record["resumed"] = _now()
                return
            if self.rollout.rollback and self.changing and self.snapshot:
                outcome.notes.append(self._roll_back(conn))
            if self.drained and self.drainer:
                self.drainer.hold(conn, f"{outcome.failed_step or 'the change'} failed")
                self.record["held"] = _now()
                outcome.notes.append(f"{self.drainer.describe} stays drained: fix the cause, then resume it "
                                     "(scontrol update NodeName=... State=RESUME) or run again")
        except GpunodeError as exc:
            outcome.status = "failed"
            outcome.notes.append(f"after the change: {exc.cause} (fix: {exc.fix})")
        finally:
            conn.close()

    def _roll_back(self, conn: Connection) -> str:
        """The NVIDIA packages as the snapshot had them; a reboot only when the module loaded is not theirs."""
        assert self.snapshot is not None
        if self.snapshot.manager != "apt":
            self.record["rollback"] = "not supported"
            return (f"rollback: not done on a {self.snapshot.manager} host yet; the packages held before were "
                    + ", ".join(f"{n} {v}" for n, v in sorted(self.snapshot.installed.items())))
        now = DriverSnapshot.parse(conn.run(SNAPSHOT_COMMAND, label="rollback: NVIDIA packages now").stdout)
        command = self.snapshot.restore_command(now)
        if command is None:
            self.record["rollback"] = "nothing to restore"
            return "rollback: the NVIDIA packages are as they were before the change"
        result = conn.run(command, label="rollback: NVIDIA packages as they were", timeout=3600)
        if not result.ok:
            self.record["rollback"] = "failed"
            raise GpunodeError(f"rollback failed (exit {result.exit_code}): {result.tail(6)}", step="rollback",
                               fix="the old versions may be gone from the package sources; install them by hand "
                               f"({' '.join(self.snapshot.restore_specs(now))})")
        self.record["rollback"] = self.snapshot.restore_specs(now)
        loaded = conn.run("cat /sys/module/nvidia/version 2>/dev/null", label="rollback: module loaded").stdout.strip()
        if loaded and self.snapshot.loaded and loaded != self.snapshot.loaded:
            self._reboot(conn)
            return (f"rollback: restored {' '.join(self.snapshot.restore_specs(now))} and rebooted (module {loaded} "
                    f"was loaded, {self.snapshot.loaded} held before)")
        return f"rollback: restored {' '.join(self.snapshot.restore_specs(now))} (no reboot: the module loaded is " \
               f"{loaded or 'none'})"

    def _reboot(self, conn: Connection) -> None:
        marker = conn.boot_marker()
        conn.run("nohup sh -c 'sleep 1; systemctl reboot || reboot' >/dev/null 2>&1 &", label="rollback: reboot")
        conn.wait_for_reboot(marker)
        self.record["rebooted"] = _now()

    def _finish(self, outcome: HostOutcome) -> HostOutcome:
        if self.first_disturbing and self._drains and "drain_before" not in self.record:
            self.record["would_drain_before"] = self.first_disturbing
        outcome.rollout = dict(self.record)
        return outcome
