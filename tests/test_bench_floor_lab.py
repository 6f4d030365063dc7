"""bench/floor.py against a real lab host: exactly one remote command and one login in the host's own sshd log,
host keys verified (an unknown key is refused before any command), measured like every bench tool (CPU recorded).
No timing is asserted."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # bench/ is part of the checkout, not of the installed package

from bench import hosts as bench_hosts  # noqa: E402
from bench.measure import run_measured  # noqa: E402
from bench.tools import FLOOR, Floor  # noqa: E402
from bench.workload import Access  # noqa: E402

pytestmark = pytest.mark.lab


def verbose_sshd(host) -> None:
    assert host.run_inside(bench_hosts.VERBOSE_SSHD).returncode == 0


def test_floor_sends_one_command_per_host_and_verifies_host_keys(lab, fresh_host, tmp_path: Path):
    verbose_sshd(fresh_host)
    access = bench_hosts.access(lab)
    floor = Floor()
    floor.prepare(tmp_path, bench_hosts.bench_hosts([fresh_host]), access)
    invocation = floor.invocation(tmp_path, 1, "t")
    assert invocation.argv[:2] == [sys.executable, str(FLOOR)]  # gpunode's python: gpunode's paramiko
    since = time.time()
    measured = run_measured(invocation.argv, env=invocation.env, log=tmp_path / "floor.log")
    assert measured.exit_code == 0, measured.output
    assert measured.output.split() == [f"{fresh_host.address}:22", "ok"]
    assert floor.outcome(invocation, measured.exit_code, measured.output).exec_count == 1
    assert measured.cpu_seconds > 0
    counts = bench_hosts.sshd_counts([fresh_host], since)
    assert (counts.sessions, counts.logins) == (1, 1)

    stranger = tmp_path / "empty_known_hosts"
    stranger.write_text("")
    floor.prepare(tmp_path, bench_hosts.bench_hosts([fresh_host]), Access(access.user, access.key, str(stranger)))
    invocation = floor.invocation(tmp_path, 1, "unknown-key")
    since = time.time()
    refused = run_measured(invocation.argv, env=invocation.env, log=tmp_path / "refused.log")
    assert refused.exit_code == 1
    assert "not found in known_hosts" in refused.output
    assert not floor.outcome(invocation, refused.exit_code, refused.output).ok
    assert bench_hosts.sshd_counts([fresh_host], since).sessions == 0
