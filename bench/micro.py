"""Small measurements: verify-gpu parse time per capture, and facts gathering time on a lab host."""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

from bench import bench_parse
from bench.measure import run_measured
from bench.tools import Ansible
from bench.workload import Access, BenchHost
from gpunode.connection import ConnectOptions, connect
from gpunode.inventory import load_inventory
from gpunode.runner import remote_lock


def parse_times(repeat: int = 20, directory: Path = bench_parse.DEFAULT_DIR) -> dict:
    """Best-of-`repeat` parse time of every nvidia-smi XML capture (bench/bench_parse.py)."""
    if not directory.is_dir():
        return {"skipped": f"no fixtures at {directory}"}
    rows = bench_parse.run(directory, repeat)
    times = [ms for _, _, ms in rows]
    return {
        "captures": len(rows), "repeat": repeat,
        "min_ms": round(min(times), 3), "median_ms": round(statistics.median(times), 3),
        "max_ms": round(max(times), 3), "target_ms": bench_parse.TARGET_MS,
        "per_capture": [{"file": name, "kib": round(size / 1024, 1), "ms": round(ms, 3)} for name, size, ms in rows],
    }


def facts_times(folder: Path, host: BenchHost, access: Access, inventory: Path, bin_dir: Path,
                repeat: int = 5) -> dict:
    """gpunode: the lock+facts exec alone (in-process, connection already open) and `gpunode facts` end to end;
    Ansible: `ansible -m setup` end to end (its fact gathering) on the same host."""
    node = load_inventory(str(inventory)).hosts[host.name]
    conn = connect(node, ConnectOptions())
    conn.open()
    exec_times = []
    try:
        for _ in range(repeat):
            started = time.monotonic()
            lock = remote_lock.acquire(conn)
            exec_times.append(time.monotonic() - started)
            lock.release()
    finally:
        conn.close()
    cli = [run_measured([sys.executable, "-m", "gpunode", "facts", "-i", str(inventory), host.name, "--json"],
                        cwd=folder) for _ in range(repeat)]
    tool = Ansible(bin_dir)
    tool.prepare(folder, [host], access)
    setup = []
    for i in range(repeat):
        invocation = tool.invocation(folder, 1, f"setup{i}")  # the same cold-connection settings as the runs
        argv = [str(bin_dir / "ansible"), "-i", str(tool.inventory), host.name, "-m", "ansible.builtin.setup"]
        setup.append(run_measured(argv, env=invocation.env, cwd=folder))
        tool.finish(invocation)
    failed = [m for m in cli + setup if m.exit_code != 0]
    if failed:
        raise RuntimeError(f"facts bench failed: {failed[0].argv}: {failed[0].output[-2000:]}")
    return {
        "repeat": repeat,
        "gpunode_facts_exec_s": _stats(exec_times),
        "gpunode_facts_cli_s": _stats([m.seconds for m in cli]),
        "ansible_setup_cli_s": _stats([m.seconds for m in setup]),
    }


def _stats(values: list[float]) -> dict:
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3),
            "max": round(max(values), 3)}
