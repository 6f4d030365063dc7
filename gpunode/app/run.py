"""Running a playbook on hosts: live progress (or plain lines), the summary, JSON/JUnit reports, per-host logs."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpunode.app.exitcodes import EXIT_FAILED, EXIT_OK
from gpunode.connection import ConnectOptions
from gpunode.errors import UsageError
from gpunode.playbook.validate import check_arguments, misspelt_variables
from gpunode.report.text import say
from gpunode.runner.early import EarlyConnections

if TYPE_CHECKING:
    from gpunode.inventory import Host
    from gpunode.playbook import Playbook
    from gpunode.report.model import RunResult


def run_and_report(book: Playbook, selected: list[Host], check: bool, forks: int, extra_vars: dict[str, Any],
                   json_report: str | None, junit: str | None, accept_new_host_keys: bool, verbose: bool,
                   log_dir: str | None = None, diff: bool = False, *, max_diff_size: int | None = None) -> int:
    """Run a (loaded or built) playbook with live progress, reports and the summary; returns the exit code.
    Diffs show in check mode; `diff` (`--diff`) shows those of a real run's changes too.

    The connections start opening first: the code for the run, the live display and the summary imports while the
    hosts answer."""
    check_arguments(book, selected, extra_vars)  # a wrong value is refused before any host is contacted
    from gpunode.schedulers.drain import drainer_for

    for host in selected:  # a wrong scheduler name too
        drainer_for(host.name, host.vars)
    for user in book.library:  # code taken from the project's library/ folder is never taken silently
        say(f"user steps: {user.shown}")
    for warning in misspelt_variables(book, selected, extra_vars):
        say(f"warning: {warning}", stream=sys.stderr)
    logs = Path(log_dir) if log_dir else default_log_path()
    try:
        logs.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create the per-host log folder {logs}: {exc.strerror or exc}",
                         fix="run from a folder you can write to, or give --log-dir DIR") from None
    if not log_dir:
        prune_run_logs(logs.parent)
    connect_options = ConnectOptions(accept_new_host_keys=accept_new_host_keys, log_dir=logs)
    early = EarlyConnections(selected, connect_options, forks)
    try:
        from gpunode.report.live import LiveEvents, PlainEvents
        from gpunode.report.summary import print_summary
        from gpunode.runner.run import RunOptions, run_playbook
    except BaseException:
        early.abandon()
        raise
    options = RunOptions(check=check, forks=forks, extra_vars=extra_vars, connect=connect_options)
    if max_diff_size:
        options.max_diff_size = max_diff_size
    if book.rollout.rolling:
        say(rollout_plan(book, selected))
    if is_tty() and not verbose:
        with LiveEvents([h.name for h in selected]) as events:
            result = run_playbook(book, selected, options, events, early)
    else:
        result = run_playbook(book, selected, options, PlainEvents(verbose=verbose), early)
    write_reports(result, json_report, junit)
    print_summary(result, show_diffs=True if diff else None)
    say(f"per-host logs: {logs}/")
    return EXIT_FAILED if result.exit_code else EXIT_OK


def rollout_plan(book: Playbook, selected: list[Host]) -> str:
    """The batches in order (the canary first), and which hosts leave their scheduler before a change that
    disturbs their GPUs."""
    rollout = book.rollout
    written = [f"canary: {rollout.canary}"] if rollout.canary else []
    written += [f"serial: {', '.join(rollout.serial)}"] if rollout.serial else []
    batches = rollout.batches([h.name for h in selected])
    lines = [f"rollout ({'; '.join(written)}): " + "; ".join(
        f"batch {n}{' (canary)' if n == 1 and rollout.canary else ''}: {', '.join(names)}"
        for n, names in enumerate(batches, 1))]
    if book.gate:
        lines.append(f"  gate after each changed host: {', '.join(s.name for s in book.gate)}")
    return "\n".join(lines)


def diff_size(value: str | int | None) -> int | None:
    """--max-diff-size checked before anything connects (None: the default, 100 KB per step)."""
    if value is None:
        return None
    from gpunode.steps.diffs import parse_size

    try:
        return parse_size(value)
    except ValueError as exc:
        raise UsageError(str(exc), fix="give bytes, or K/M: --max-diff-size 1M") from None


KEEP_RUN_LOGS = 20  # run folders kept under .gpunode/logs (GPUNODE_KEEP_LOGS changes it)


def prune_run_logs(folder: Path) -> None:
    """Keep the newest run folders of .gpunode/logs (named <date>-<time>-<pid>: they sort by time); a --log-dir
    folder is the user's and never pruned."""
    import os
    import re
    import shutil

    try:
        keep = max(1, int(os.environ.get("GPUNODE_KEEP_LOGS", KEEP_RUN_LOGS)))
    except ValueError:
        keep = KEEP_RUN_LOGS
    runs = sorted(p for p in folder.iterdir() if p.is_dir() and re.fullmatch(r"\d{8}-\d{6}-\d+", p.name))
    for old in runs[:-keep]:
        shutil.rmtree(old, ignore_errors=True)


def default_log_path() -> Path:
    from gpunode.runner.run import default_log_dir

    return default_log_dir()


def write_reports(result: RunResult, json_report: str | None, junit: str | None) -> None:
    """The report files asked for, each said on stderr (stdout may be JSON a script reads)."""
    if json_report:
        Path(json_report).write_text(json.dumps(result.to_dict(), indent=2) + "\n")
        say("wrote the JSON report: ", json_report, stream=sys.stderr)
    if junit:
        from gpunode.report.junit import junit_xml

        Path(junit).write_text(junit_xml(result))
        say("wrote JUnit XML: ", junit, stream=sys.stderr)


def is_tty() -> bool:
    return sys.stderr.isatty()
