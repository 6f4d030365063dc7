"""The end-of-run summary: a table per host, check-mode diffs, and each failure with its fix."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from gpunode.report.console import make_console
from gpunode.report.live import STATUS_STYLE
from gpunode.report.model import HostOutcome, RunResult
from gpunode.report.phases import READY_PHASES, phase_line
from gpunode.report.text import line, literal

DIFF_VERBS = {"would-change": "would", "changed": "changed"}


def print_summary(result: RunResult, console: Console | None = None, show_diffs: bool | None = None) -> None:
    """Diffs (check mode or --diff), the per-host table, each failure with its fix, and the one-line total."""
    console = console or make_console()
    show_diffs = result.check if show_diffs is None else show_diffs
    if show_diffs:
        for host in result.hosts:
            _print_diffs(console, host)
    console.print(_table(result))
    for host in result.hosts:
        _print_phases(console, host)
    for host in result.hosts:
        _print_problems(console, host)
    console.print(literal(total_line(result)))


def total_line(result: RunResult) -> str:
    """`2 ok, 1 failed (n1) in 3.0s`; hosts a stopped rollout or Ctrl-C never ran are counted apart, as cancelled."""
    failed = [h.host for h in result.hosts if h.failed and h.status != "cancelled"]
    cancelled = [h.host for h in result.hosts if h.status == "cancelled"]
    ok = len(result.hosts) - len(failed) - len(cancelled)
    return (f"{ok} ok, {len(failed)} failed" + (f" ({', '.join(failed)})" if failed else "")
            + (f", {len(cancelled)} cancelled ({', '.join(cancelled)})" if cancelled else "")
            + f" in {result.seconds:.1f}s")


def _print_diffs(console: Console, host: HostOutcome) -> None:
    """Each changed (or would-change) step of a host: its actions with their reasons, then its diffs."""
    for step in host.steps:
        verb = DIFF_VERBS.get(step.status)  # changed: a real run with --diff
        if not verb or not (step.actions or step.diffs or step.message):
            continue  # a header with nothing under it says nothing
        console.print(line((host.host, "cyan"), f" {step.name} ({step.where}) {verb}:"))
        if not step.actions and not step.diffs:  # e.g. unknown until run: only the reason is known
            console.print(line("    ", (step.message, "dim")))
        for action in step.actions:
            reason = ("  (" + action["reason"] + ")", "dim") if action["reason"] else ""
            console.print(line(f"    - {action['summary']}", reason))
        for diff in step.diffs:
            console.print(literal(_labels(diff, step.status).rstrip("\n")))


def _table(result: RunResult) -> Table:
    """One row per host: status, step counts (Ansible's recap), remote execs and time."""
    table = Table(title=literal(f"{'CHECK (nothing changed)' if result.check else 'summary'}: {result.playbook}"))
    for column in ("host", "status", "ok", "changed", "skipped", "failed", "ignored", "remote execs", "time"):
        table.add_column(column, justify="right" if column not in ("host", "status") else "left")
    for host in result.hosts:
        counts = {s: _count(host, s) for s in ("ok", "skipped", "failed")}
        ignored = sum(1 for step in host.steps if step.ignored)  # Ansible's recap: ignored=N
        table.add_row(literal(host.host), literal(host.status, STATUS_STYLE.get(host.status, "")),
                      str(counts["ok"]), str(host.changed), str(counts["skipped"]), str(counts["failed"]),
                      str(ignored), str(host.exec_count), f"{host.seconds:.1f}s")
    return table


def _print_phases(console: Console, host: HostOutcome) -> None:
    """A host that did GPU node work (kernel, driver, module, initramfs): its time by phase, and how many initramfs
    images it generated."""
    if not set(host.phase_times) & set(READY_PHASES):
        return
    generations = sum(1 for mark in host.timed if mark["kind"] == "initramfs")
    images = f" ({generations} initramfs generation{'s' if generations != 1 else ''})" if generations else ""
    console.print(line((f"{host.host}:", "cyan"), f" phases{images}: {phase_line(host.phase_times)}"))


NOTE_PREFIXES = ("handlers notified but not run", "handlers that would run", "still running on",
                 "package share off for this host",  # a problem of the run's own making, with its fix
                 "module cache: ",  # a cache entry refused, a URL not read, a build not added
                 # a rolling run (runner/rolling.py): the drain and gate --check announces, what happened after
                 "would drain ", "would run the gate", "rollback: ", "after the change: ", "slurm node ",
                 "kubernetes node ")


def _print_problems(console: Console, host: HostOutcome) -> None:
    """A host's error with where and its fix, the notes worth showing, and its log path."""
    if host.error:
        where = f" at step '{host.failed_step}'" if host.failed_step else ""
        console.print(line((f"{host.host}{where}:", "bold red"), " ", host.error))
        if host.fix:
            console.print(line("  ", ("fix:", "bold"), " ", host.fix))
    for note in host.notes:
        if note.startswith(NOTE_PREFIXES):
            console.print(line((f"{host.host}:", "yellow"), " ", note))
    if host.error and host.log_path:
        console.print(literal(f"  log: {host.log_path}"))


def _labels(diff: str, status: str) -> str:
    """A diff is made when the step is planned (`(now)` / `(planned)`); after a real run (`--diff`) it shows what
    changed: `(before)` / `(after)`."""
    if status != "changed":
        return diff
    lines = diff.split("\n")
    for index, text in enumerate(lines[:2]):
        if text.startswith("--- ") and text.endswith(" (now)"):
            lines[index] = text.removesuffix(" (now)") + " (before)"
        elif text.startswith("+++ ") and text.endswith(" (planned)"):
            lines[index] = text.removesuffix(" (planned)") + " (after)"
    return "\n".join(lines)


def _count(host: HostOutcome, status: str) -> int:
    """Steps of a host with this status; a failure that `ignore_errors` let pass is not counted."""
    return sum(1 for step in host.steps if step.status == status and not step.ignored)
