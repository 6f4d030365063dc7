"""Run one tool invocation in a subprocess: wall time, exit code, output, controller CPU time and peak memory.

CPU time is user + system seconds from wait4()'s rusage: the tool and every descendant it waited for (like
getrusage(RUSAGE_CHILDREN)); a daemonized descendant nobody waits for (ssh's ControlPersist master) is not in it.

Peak memory two ways: the largest single process of the run (max RSS of the tool and its waited-for children),
and the largest sum of RSS over the whole process tree, sampled from /proc every 20 ms (less often when a scan is
slow or the run long: SAMPLE_*; a tool that forks workers
uses their sum, which the max misses). The max comes from GNU time (/usr/bin/time, the `time` package) that starts
the tool: Linux carries a parent's RSS high-water mark into a child it forks, through the exec, so the tool's own
ru_maxrss, were it started by the bench (about 50 MiB of Python), would be at least the bench's RSS; started by
`time` (about 2 MiB), it is the tool's. Without /usr/bin/time the ru_maxrss of the bench's child is used (then
only an upper bound).
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024
GNU_TIME = Path("/usr/bin/time")
SAMPLE_SECONDS = 0.02
# A sample reads /proc/<pid>/stat of every process on the machine (about 7 ms of CPU for 250 processes; each lab
# host adds about 10), on the cores the tools and hosts share: the sampler waits at least 4 times its last scan (at
# most a fifth of a core, whatever N), and past the first seconds of a run 0.25 s.
SAMPLE_FAST_FOR, SAMPLE_SLOW_SECONDS, SAMPLE_IDLE_FACTOR = 5.0, 0.25, 4


@dataclass
class Measured:
    """One tool run."""

    argv: list[str]
    exit_code: int
    seconds: float
    maxrss_kib: int          # max RSS of the run's largest process (GNU time's %M, else ru_maxrss)
    tree_rss_kib: int        # peak sum of RSS over the process tree (sampled)
    cpu_seconds: float       # user + system CPU of the run and its waited-for descendants
    output: str


def run_measured(argv: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None,
                 timeout: float = 1800, log: Path | None = None) -> Measured:
    """Run argv to completion and measure it; output goes to `log` (or a temp file) and is returned."""
    log = log or Path(f"/tmp/gpunode-bench-{os.getpid()}.log")
    rss_file = log.with_name(log.name + ".maxrss")
    wrapper = [str(GNU_TIME), "-o", str(rss_file), "-f", "%M"] if GNU_TIME.exists() else []
    with open(log, "wb") as out:
        started = time.monotonic()
        try:
            process = subprocess.Popen([*wrapper, *argv], stdin=subprocess.DEVNULL, stdout=out,
                                       stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}, cwd=cwd,
                                       start_new_session=True)
        except OSError as exc:  # no GNU time and no such program: what a shell would say (exit 127)
            return Measured(argv, 127, time.monotonic() - started, 0, 0, 0.0, f"cannot run {argv[0]}: {exc}")
        sampler = _TreeSampler(process.pid, skip_root=bool(wrapper))
        sampler.start()
        timer = threading.Timer(timeout, os.killpg, (process.pid, signal.SIGKILL))
        timer.start()
        try:
            _, status, usage = os.wait4(process.pid, 0)
        finally:
            timer.cancel()
            sampler.stop()
        seconds = time.monotonic() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    maxrss = _time_maxrss(rss_file) if wrapper else None
    rss_file.unlink(missing_ok=True)
    return Measured(argv, process.returncode, seconds, usage.ru_maxrss if maxrss is None else maxrss,
                    sampler.peak_kib, usage.ru_utime + usage.ru_stime, log.read_text(errors="replace"))


def _time_maxrss(path: Path) -> int | None:
    """GNU time's %M (KiB): the last line of its output file ("Command exited with non-zero status N" may come
    first)."""
    try:
        last = path.read_text().strip().splitlines()[-1]
    except (OSError, IndexError):
        return None
    return int(last) if last.isdigit() else None


class _TreeSampler(threading.Thread):
    """Samples the RSS sum of a process and all its descendants; keeps the peak."""

    def __init__(self, pid: int, skip_root: bool = False) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.skip_root = skip_root  # the root is GNU time: count only what it started
        self.peak_kib = 0
        self._stop_event = threading.Event()

    def run(self) -> None:
        started = time.monotonic()
        while not self._stop_event.is_set():
            before = time.monotonic()
            self.peak_kib = max(self.peak_kib, tree_rss_kib(self.pid, self.skip_root))
            scan = time.monotonic() - before
            base = SAMPLE_SLOW_SECONDS if before - started > SAMPLE_FAST_FOR else SAMPLE_SECONDS
            self._stop_event.wait(max(base, SAMPLE_IDLE_FACTOR * scan))

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


def tree_rss_kib(root: int, skip_root: bool = False) -> int:
    """Sum of resident memory (KiB) of `root` (unless skip_root) and its descendants, now."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # after the command's name: state, ppid (field 4 of proc(5)), ..., rss in pages (field 24), as statm's
        children.setdefault(int(fields[1]), []).append(int(entry))
        rss[int(entry)] = int(fields[21]) * PAGE_KIB
    total, todo = 0, [root]
    if skip_root:
        total -= rss.get(root, 0)
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo += children.get(pid, [])
    return total
