"""Live per-host progress: a rich table on a terminal, plain timestamped lines otherwise (CI logs)."""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

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
    """One line per event, safe for logs and pipes; a step that runs long gets a heartbeat line (elapsed time, the
    host's log) every `heartbeat` seconds without other lines, so that CI logs and `| tee` show it is alive."""

    def __init__(self, stream=None, verbose: bool = False, heartbeat: float | None = None) -> None:
        self.stream = stream or sys.stdout
        self.verbose = verbose
        self.lock = threading.Lock()
        self.heartbeat = heartbeat if heartbeat is not None else heartbeat_seconds()
        self.logs: dict[str, str] = {}
        self.running: dict[str, list] = {}  # host -> [step, started, last line]
        self._beating: threading.Thread | None = None

    def _line(self, text: str, host: str = "") -> None:
        with self.lock:
            print(f"{time.strftime('%H:%M:%S')} {visible(text)}", file=self.stream, flush=True)
            if host in self.running:
                self.running[host][2] = time.monotonic()

    def host_started(self, host: str, log_path: str = "") -> None:
        self.logs[host] = log_path
        self._line(f"[{host}] connecting")

    def step_started(self, host: str, step: str) -> None:
        now = time.monotonic()
        with self.lock:
            self.running[host] = [step, now, now]
        if self.verbose:
            self._line(f"[{host}] {step} ...", host)
        if self.heartbeat > 0 and not (self._beating and self._beating.is_alive()):
            self._beating = threading.Thread(target=self._beat, name="heartbeat", daemon=True)
            self._beating.start()

    def step_finished(self, host: str, outcome: StepOutcome) -> None:
        with self.lock:
            self.running.pop(host, None)
        detail = "; ".join(a["summary"] for a in outcome.actions) if outcome.status != "ok" else ""
        detail = detail or outcome.message
        status = f"{outcome.status} (ignored: ignore_errors)" if outcome.ignored else outcome.status
        self._line(f"[{host}] {outcome.name}: {status}{' - ' + detail if detail else ''}")

    def output(self, host: str, line: str) -> None:
        if self.verbose:
            self._line(f"[{host}]   | {line}", host)

    def notice(self, host: str, text: str) -> None:
        self._line(f"[{host}] {text}")

    def host_finished(self, outcome: HostOutcome) -> None:
        with self.lock:
            self.running.pop(outcome.host, None)
        extra = f": {outcome.error}" if outcome.error else ""
        self._line(f"[{outcome.host}] {outcome.status.upper()} ({outcome.changed} changed, "
                   f"{outcome.exec_count} remote execs, {outcome.seconds:.1f}s){extra}")

    def _beat(self) -> None:
        """While steps run: a line for each host quiet for `heartbeat` seconds."""
        while True:
            time.sleep(min(self.heartbeat, 1.0))
            now = time.monotonic()
            with self.lock:
                if not self.running:
                    return
                due = [(h, step, now - since) for h, (step, since, last) in self.running.items()
                       if now - last >= self.heartbeat]
            for host, step, elapsed in due:
                log = f"; log: {self.logs[host]}" if self.logs.get(host) else ""
                self._line(f"[{host}] {step}: still running ({duration(elapsed)}{log})", host)


def heartbeat_seconds() -> float:
    """GPUNODE_HEARTBEAT (seconds; 0 turns it off), else 30."""
    try:
        return float(os.environ.get("GPUNODE_HEARTBEAT", "30"))
    except ValueError:
        return 30.0


def duration(seconds: float) -> str:
    """4s, 2m05s, 1h02m."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


class LiveEvents:
    """A table with one row per host, refreshed in place."""

    def __init__(self, hosts: list[str], console: Console | None = None) -> None:
        from rich.live import Live

        from gpunode.report.console import make_console

        self.console = console or make_console(stderr=True)
        self.rows: dict[str, dict[str, Any]] = {
            h: {"status": "waiting", "step": "", "changed": 0, "started": 0.0, "done": 0.0} for h in hosts}
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

    def host_started(self, host: str, log_path: str = "") -> None:
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
