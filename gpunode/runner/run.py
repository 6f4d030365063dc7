"""Run a playbook on many hosts at once: bounded parallelism, one failure never stops the others."""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gpunode.connection import Connection, ConnectOptions, connect
from gpunode.inventory import Host
from gpunode.playbook import Playbook
from gpunode.playbook.rollout import Rollout
from gpunode.report.model import HostOutcome, RunResult
from gpunode.runner.early import EarlyConnections
from gpunode.runner.events import Events, NoEvents
from gpunode.runner.host_run import HostRun
from gpunode.runner.rolling import HostRollout
from gpunode.schedulers.drain import drainer_for
from gpunode.steps.diffs import DEFAULT_MAX_DIFF_SIZE


@dataclass
class RunOptions:
    check: bool = False
    forks: int = 10
    extra_vars: dict[str, Any] = field(default_factory=dict)
    connect: ConnectOptions = field(default_factory=ConnectOptions)
    max_diff_size: int = DEFAULT_MAX_DIFF_SIZE  # bytes of diff per step (Ansible's max_diff_size)


def run_playbook(playbook: Playbook, hosts: list[Host], options: RunOptions,
                 events: Events | None = None, early: EarlyConnections | None = None) -> RunResult:
    """Run on every host; Ctrl-C cancels cleanly (connections closed, remote locks released). `early`: the hosts'
    connections, some already opening (made by the caller before its own set-up)."""
    events = events or NoEvents()
    cancel = threading.Event()
    started = time.monotonic()
    connections: dict[str, Connection] = (early.connections if early else
                                          {h.name: connect(h, options.connect) for h in hosts})
    opening = early.opening if early else {}
    runs = [HostRun(h, connections[h.name], playbook, options.extra_vars, options.check, events, cancel,
                    opening=opening.get(h.name), max_diff_size=options.max_diff_size) for h in hosts]
    rolling = host_rollouts(playbook, hosts) if playbook.rollout.rolling or playbook.gate else {}
    outcomes: dict[str, HostOutcome] = {}
    pool = ThreadPoolExecutor(max_workers=max(1, min(options.forks, len(hosts))), thread_name_prefix="host")
    try:
        batches = playbook.rollout.batches(runs)
        for number, batch in enumerate(batches, 1):
            if not _run_batch(pool, batch, outcomes, cancel, connections, rolling):
                _not_run(runs, outcomes, "interrupted by the user (Ctrl-C) before it ran")
                break
            failed = sum(outcomes[run.host.name].failed for run in batch)
            if number < len(batches) and playbook.rollout.stops_after(failed, len(batch), number):
                _not_run(runs, outcomes, f"not run: the rollout stopped after batch {number} of {len(batches)}, "
                         f"where {failed} of {len(batch)} host(s) failed{_limit(playbook.rollout, number)}",
                         "fix the failed hosts (their errors are above) and run again: the hosts done are converged "
                         "and change nothing")
                break
    finally:
        pool.shutdown(wait=True)
    return RunResult(playbook.path, options.check, [outcomes[h.name] for h in hosts], time.monotonic() - started)


def default_log_dir() -> Path:
    """Per-run log folder: .gpunode/logs/<timestamp>-<pid>/ in the current directory (two runs started in the same
    second never share a host's log)."""
    return Path(".gpunode") / "logs" / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"


def host_rollouts(playbook: Playbook, hosts: list[Host]) -> dict[str, HostRollout]:
    """Each host's rolling side: its scheduler (from its inventory variables) and the play's gate."""
    gate = replace(playbook, name=f"{playbook.name} (gate)", steps=playbook.gate, handlers={}, gate=[]) \
        if playbook.gate else None
    return {h.name: HostRollout(playbook.rollout, drainer_for(h.name, h.vars), gate) for h in hosts}


def _run_batch(pool: ThreadPoolExecutor, batch: list[HostRun], outcomes: dict[str, HostOutcome],
               cancel: threading.Event, connections: dict[str, Connection],
               rolling: dict[str, HostRollout] | None = None) -> bool:
    """Run the batch's hosts at once into `outcomes`; False after Ctrl-C, which cancels cleanly (the hosts not
    started are cancelled). A rolling run's hosts go through their HostRollout."""
    rolling = rolling or {}
    futures = {pool.submit(rolling[run.host.name].run, run) if run.host.name in rolling else pool.submit(run.run): run
               for run in batch}
    try:
        for future in as_completed(futures):  # wakes as each host ends (Ctrl-C still interrupts the wait)
            outcomes[futures[future].host.name] = future.result()
    except KeyboardInterrupt:
        cancel.set()
        for future in futures:
            future.cancel()
        for conn in connections.values():
            conn.interrupt()  # in-flight commands end with their channels; each host then releases its lock
        pool.shutdown(wait=True, cancel_futures=True)
        for future, run in futures.items():
            if run.host.name not in outcomes:
                outcome = future.result() if future.done() and not future.cancelled() else run.outcome
                if not outcome.failed:  # never started, or finished cleanly while we stopped
                    outcome.status, outcome.error = "cancelled", "interrupted by the user (Ctrl-C) before it ran"
                outcomes[run.host.name] = outcome
        return False
    return True


def _not_run(runs: list[HostRun], outcomes: dict[str, HostOutcome], why: str, fix: str = "") -> None:
    """The hosts of the batches after a stopped one: cancelled, with why."""
    for run in runs:
        if run.host.name not in outcomes:
            run.outcome.status, run.outcome.error, run.outcome.fix = "cancelled", why, fix
            outcomes[run.host.name] = run.outcome


def _limit(rollout: Rollout, number: int) -> str:
    if number == 1 and rollout.canary:  # Rollout.stops_after: a canary batch stops at its first failure
        return " (the canary batch: any failure there stops the rollout, whatever max_fail_percentage says)"
    if rollout.max_fail_percentage is None:
        return " (every host of a batch failed)"
    return f" (more than max_fail_percentage {rollout.max_fail_percentage:g}%)"
