"""Live per-host progress: a rich table on a terminal, plain timestamped lines otherwise (CI logs)."""

from __future__ import annotations

import sys
import threading
import time
from typing import TYPE_CHECKING

from gpunode.report.model import HostOutcome, StepOutcome
from gpunode.report.text import literal, visible

if TYPE_CHECKING:  # rich is imported by LiveEvents only: plain lines (CI, pipes, --verbose) never load it
    from rich.console import Console
    from rich.table import Table

STATUS_STYLE = {
    "ok": "green", "changed": "yellow", "would-change": "cyan", "skipped": "dim",
    "failed": "bold red", "unreachable": "bold red", "cancelled": "magenta", "running": "blue",
}


class PlainEvents:
    """One line per event, safe for logs and pipes."""

    def __init__(self, stream=None, verbose: bool = False) -> None:
        self.stream = stream or sys.stdout
        self.verbose = verbose
        self.lock = threading.Lock()

    def _line(self, text: str) -> None:
        with self.lock:
            print(f"{time.strftime('%H:%M:%S')} {visible(text)}", file=self.stream, flush=True)

    def host_started(self, host: str) -> None:
        self._line(f"[{host}] connecting")

    def step_started(self, host: str, step: str) -> None:
        if self.verbose:
            self._line(f"[{host}] {step} ...")

    def step_finished(self, host: str, outcome: StepOutcome) -> None:
        detail = "; ".join(a["summary"] for a in outcome.actions) if outcome.status != "ok" else ""
        detail = detail or outcome.message
        status = f"{outcome.status} (ignored: ignore_errors)" if outcome.ignored else outcome.status
        self._line(f"[{host}] {outcome.name}: {status}{' - ' + detail if detail else ''}")

    def output(self, host: str, line: str) -> None:
        if self.verbose:
            self._line(f"[{host}]   | {line}")

    def notice(self, host: str, text: str) -> None:
        self._line(f"[{host}] {text}")

    def host_finished(self, outcome: HostOutcome) -> None:
        extra = f": {outcome.error}" if outcome.error else ""
        self._line(f"[{outcome.host}] {outcome.status.upper()} ({outcome.changed} changed, "
                   f"{outcome.exec_count} remote execs, {outcome.seconds:.1f}s){extra}")


class LiveEvents:
    """A table with one row per host, refreshed in place."""

    def __init__(self, hosts: list[str], console: Console | None = None) -> None:
        from rich.live import Live

        from gpunode.report.console import make_console

        self.console = console or make_console(stderr=True)
        self.rows = {h: {"status": "waiting", "step": "", "changed": 0, "started": 0.0, "done": 0.0} for h in hosts}
        self.lock = threading.Lock()
        # get_renderable: the table is rebuilt on every refresh, so a long step's time ticks while it runs
        self.live = Live(console=self.console, refresh_per_second=4, transient=False, get_renderable=self._table)

    def __enter__(self) -> LiveEvents:
        self.live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.live.refresh()
        self.live.__exit__(*exc)

    def _table(self) -> Table:
        from rich.table import Table

        table = Table(title="gpunode", expand=False)
        for column in ("host", "status", "step", "changed", "time"):
            table.add_column(column)
        now = time.monotonic()
        with self.lock:
            rows = [(host, dict(row)) for host, row in self.rows.items()]
        for host, row in rows:
            elapsed = (row["done"] or now) - row["started"] if row["started"] else 0.0
            table.add_row(literal(host), literal(row["status"], STATUS_STYLE.get(row["status"], "")),
                          literal(row["step"]), str(row["changed"]), f"{elapsed:.0f}s")
        return table

    def _set(self, host: str, **values) -> None:
        with self.lock:
            self.rows[host].update(values)
        self.live.refresh()

    def host_started(self, host: str) -> None:
        self._set(host, status="running", step="connect", started=time.monotonic())

    def step_started(self, host: str, step: str) -> None:
        self._set(host, step=step)

    def step_finished(self, host: str, outcome: StepOutcome) -> None:
        if outcome.status in ("changed", "would-change"):
            self._set(host, changed=self.rows[host]["changed"] + 1)

    def output(self, host: str, line: str) -> None:
        self._set(host, step=visible(line)[-60:])

    def notice(self, host: str, text: str) -> None:
        self._set(host, step=visible(text)[:80])

    def host_finished(self, outcome: HostOutcome) -> None:
        self._set(outcome.host, status=outcome.status, step=outcome.failed_step or "done", done=time.monotonic())
