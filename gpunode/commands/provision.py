"""`provision`: run a playbook on hosts, with live progress, a summary, reports and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

from gpunode.commands.common import EXIT_FAILED, EXIT_OK, is_tty, load_hosts, parse_vars
from gpunode.connection import ConnectOptions
from gpunode.playbook import load_playbook
from gpunode.report.junit import junit_xml
from gpunode.report.live import LiveEvents, PlainEvents
from gpunode.report.model import RunResult
from gpunode.report.summary import print_summary
from gpunode.runner import RunOptions, default_log_dir, run_playbook


def provision(inventory: list[str], hosts: str | None, playbook: str, limit: str | None, check: bool,
              forks: int, variables: list[str], json_report: str | None, junit: str | None,
              accept_new_host_keys: bool, verbose: bool, log_dir: str | None = None) -> int:
    """Returns the exit code: 0 all hosts ok, 1 some host failed."""
    book = load_playbook(playbook)
    _, selected = load_hosts(inventory, hosts, limit or book.hosts)
    logs = Path(log_dir) if log_dir else default_log_dir()
    options = RunOptions(
        check=check, forks=forks, extra_vars=parse_vars(variables),
        connect=ConnectOptions(accept_new_host_keys=accept_new_host_keys, log_dir=logs),
    )
    if is_tty() and not verbose:
        with LiveEvents([h.name for h in selected]) as events:
            result = run_playbook(book, selected, options, events)
    else:
        result = run_playbook(book, selected, options, PlainEvents(verbose=verbose))
    write_reports(result, json_report, junit)
    print_summary(result)
    print(f"per-host logs: {logs}/")
    return EXIT_FAILED if result.exit_code else EXIT_OK


def write_reports(result: RunResult, json_report: str | None, junit: str | None) -> None:
    if json_report:
        Path(json_report).write_text(json.dumps(result.to_dict(), indent=2) + "\n")
    if junit:
        Path(junit).write_text(junit_xml(result))
