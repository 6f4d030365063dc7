"""Run one tool invocation in a subprocess: wall time, exit code, output, controller CPU time and peak memory.

CPU time is user + system seconds from wait4()'s rusage: the tool and every descendant it waited for (like
getrusage(RUSAGE_CHILDREN)); a daemonized descendant nobody waits for (ssh's ControlPersist master) is not in it.

Peak memory two ways: `ru_maxrss` from wait4() (the largest single process of the run: the tool and its
waited-for children, like getrusage(RUSAGE_CHILDREN)), and the largest sum of RSS over the whole process
tree, sampled every 20 ms from /proc (a tool that forks workers uses their sum, which ru_maxrss misses).
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024
SAMPLE_SECONDS = 0.02


@dataclass
class Measured:
    """One tool run."""

    argv: list[str]
    exit_code: int
    seconds: float
    maxrss_kib: int          # ru_maxrss of the run (largest process)
    tree_rss_kib: int        # peak sum of RSS over the process tree (sampled)
    cpu_seconds: float       # user + system CPU of the run and its waited-for descendants
    output: str


def run_measured(argv: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None,
                 timeout: float = 1800, log: Path | None = None) -> Measured:
    """Run argv to completion and measure it; output goes to `log` (or a temp file) and is returned."""
    log = log or Path(f"/tmp/gpunode-bench-{os.getpid()}.log")
    with open(log, "wb") as out:
        started = time.monotonic()
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                   env={**os.environ, **(env or {})}, cwd=cwd)
        sampler = _TreeSampler(process.pid)
        sampler.start()
        timer = threading.Timer(timeout, process.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(process.pid, 0)
        finally:
            timer.cancel()
            sampler.stop()
        seconds = time.monotonic() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    return Measured(argv, process.returncode, seconds, usage.ru_maxrss, sampler.peak_kib,
                    usage.ru_utime + usage.ru_stime, log.read_text(errors="replace"))


class _TreeSampler(threading.Thread):
    """Samples the RSS sum of a process and all its descendants; keeps the peak."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak_kib = 0
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            self.peak_kib = max(self.peak_kib, tree_rss_kib(self.pid))
            self._stop_event.wait(SAMPLE_SECONDS)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


def tree_rss_kib(root: int) -> int:
    """Sum of resident memory (KiB) of `root` and its descendants, now."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            statm = Path(f"/proc/{entry}/statm").read_text().split()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
        rss[int(entry)] = int(statm[1]) * PAGE_KIB
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo += children.get(pid, [])
    return total
