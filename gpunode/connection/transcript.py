"""A per-host record of every remote execution: what ran, how long, what came back."""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from gpunode.connection.marks import Marks
from gpunode.connection.redact import Redactor

LOG_OUTPUT_LIMIT = 64 * 1024
FILE_CONTENT_LINE = re.compile(r"^base64:[A-Za-z0-9+/=]*$")  # see gpunode/steps/remote_file.py


@dataclass
class ExecRecord:
    """One remote command execution."""

    label: str
    exit_code: int | None
    seconds: float
    stdout_bytes: int
    stderr_bytes: int
    new_session: bool = True  # an SSH session of its own (False: a script run inside the run lock's session)
    activity: str = ""  # the step (or probe, release) it ran for: the phase accounting reads it (report/phases.py)


@dataclass
class Transcript:
    """Counts executions and, when given a path, appends a readable log of them (secrets masked)."""

    host: str
    redact: Redactor = field(default_factory=Redactor)
    log_path: Path | None = None
    records: list[ExecRecord] = field(default_factory=list)
    marks: Marks = field(default_factory=Marks)  # initramfs generations and DKMS builds seen in the output, timed

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._streamed = 0
        self._running = ""
        self._file: TextIO | None = None
        self.reopen()

    def reopen(self) -> None:
        """Append to the log file again after close() (a rolling run's gate and resume come after the host's run)."""
        if self.log_path and not self._file:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.log_path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()

    @property
    def exec_count(self) -> int:
        return sum(1 for r in self.records if r.new_session)

    def note(self, message: str) -> None:
        """A free-form line in the host's log (step started, step result, ...)."""
        self._write(f"{time.strftime('%H:%M:%S')} {self.redact(message)}\n")

    def begin(self, label: str) -> None:
        """A command starts: its stdout lines follow in the log as they arrive (`stream`)."""
        self._streamed, self._running = 0, label
        self.marks.begin()

    def stream(self, line: str) -> None:
        """One stdout line of the running command, written (masked) the moment it arrives."""
        self.marks.line(line, now())
        if self._streamed == 0:  # the first line: say which command it comes from
            self._write(f"{time.strftime('%H:%M:%S')} $ {self.redact(self._running)}  (running)\n  [stdout]\n")
        self._streamed += len(line) + 1
        if self._streamed <= LOG_OUTPUT_LIMIT:
            self._write(f"  | {_elide(self.redact(line))}\n")
        elif self._streamed - len(line) - 1 <= LOG_OUTPUT_LIMIT:
            self._write("  [... cut ...]\n")

    def record(self, label: str, exit_code: int | None, seconds: float, stdout: str, stderr: str,
               streamed: bool = False, new_session: bool = True, activity: str = "") -> None:
        """A finished command; with `streamed`, its stdout is already in the log (see `begin`)."""
        self.records.append(ExecRecord(label, exit_code, seconds, len(stdout), len(stderr), new_session, activity))
        self.marks.end(now(), len(self.records) - 1)
        lines = [f"{time.strftime('%H:%M:%S')} $ {self.redact(label)}  -> exit {exit_code} in {seconds:.2f}s\n"]
        for name, text in (("stdout", "" if streamed else stdout), ("stderr", stderr)):
            if text.strip():
                shown = text if len(text) <= LOG_OUTPUT_LIMIT else text[:LOG_OUTPUT_LIMIT] + "\n[... cut ...]\n"
                lines.append(f"  [{name}]\n" + "".join(f"  | {_elide(ln)}\n" for ln in self.redact(shown).splitlines()))
        self._write("".join(lines))

    def _write(self, text: str) -> None:
        if self._file:
            with self._lock:
                self._file.write(text)
                self._file.flush()

    def close(self) -> None:
        if self._file:
            self._file.close()
            self._file = None


def now() -> float:
    """The clock the phases inside a command are timed with (a test scripts it)."""
    return time.monotonic()


def _elide(line: str) -> str:
    """File contents travel base64-encoded in probes: keep them (and any secret inside) out of the log."""
    return f"[file content, {len(line) - 7} base64 characters, elided]" if FILE_CONTENT_LINE.match(line) else line
