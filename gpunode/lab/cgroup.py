"""Each lab host in a cgroup (v2) of its own, so that its own CPU time can be read (bench.ready, issue 40).

The hosts' systemd-nspawn runs with --keep-unit in the cgroup it was started in: all hosts of all labs otherwise
share one (`/payload`). The host's supervisor moves itself into `gpunode-lab/<host>` of the cgroup v2 hierarchy
before it starts nspawn, which splits it into `payload` and `supervisor` below that. Its `cpu.stat` `usage_usec`
is the CPU time of everything in it and below, present whether or not the cpu controller is enabled (the
kernel's Documentation/admin-guide/cgroup-v2.rst, "Core Interface Files"... "cpu.stat": "usage_usec, user_usec,
system_usec" are reported "whether the controller is enabled or not"; torvalds/linux v6.12). Where no cgroup v2
hierarchy is mounted or it cannot be written, a host runs as before and its CPU time is None."""

from __future__ import annotations

import contextlib
import shlex
from pathlib import Path

BASE = "gpunode-lab"


def cgroup2_root(mounts: str | None = None) -> Path | None:
    """Where the cgroup v2 hierarchy is mounted (/sys/fs/cgroup, or /sys/fs/cgroup/unified on a hybrid host)."""
    try:
        mounts = Path("/proc/self/mounts").read_text() if mounts is None else mounts
    except OSError:
        return None
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) > 2 and fields[2] == "cgroup2":
            return Path(fields[1])
    return None


def host_cgroup(name: str) -> Path | None:
    root = cgroup2_root()
    return root / BASE / name if root else None


def join_command(name: str) -> str:
    """Shell that moves the running shell into the host's cgroup (nothing where that cannot be done)."""
    folder = host_cgroup(name)
    if folder is None:
        return ""
    quoted = shlex.quote(str(folder))
    return f"{{ mkdir -p {quoted} && echo $$ > {quoted}/cgroup.procs; }} 2>/dev/null; "


def cpu_seconds(name: str) -> float | None:
    """CPU seconds used so far by the host's processes (`usage_usec` of its cpu.stat), or None."""
    folder = host_cgroup(name)
    try:
        text = (folder / "cpu.stat").read_text() if folder else ""
    except OSError:
        return None
    fields = dict(line.split(" ", 1) for line in text.splitlines() if " " in line)
    usage = fields.get("usage_usec", "").strip()
    return int(usage) / 1e6 if usage.isdigit() else None


def remove(name: str) -> None:
    """Remove the host's cgroup folders, deepest first (each empty once its processes ended)."""
    folder = host_cgroup(name)
    if folder is None or not folder.is_dir():
        return
    for sub in sorted((p for p in folder.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        with contextlib.suppress(OSError):
            sub.rmdir()
    with contextlib.suppress(OSError):
        folder.rmdir()
