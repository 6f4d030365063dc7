"""bench/measure.py: a tool's exit status, CPU and memory are its own, not the bench's (no timing asserted)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # bench/ is part of the checkout, not of the installed package

from bench.measure import GNU_TIME, run_measured  # noqa: E402

ALLOCATE_40_MIB = "import sys; b = bytearray(40 * 2**20); b[::4096] = b'x' * len(b[::4096]); sys.exit(3)"


@pytest.mark.skipif(not GNU_TIME.exists(), reason="needs GNU time (apt package `time`, in dev/setup)")
def test_max_rss_is_the_tools_not_the_bench_process(tmp_path: Path):
    ballast = bytearray(300 * 2**20)  # the bench holding 300 MiB must not show up as the tool's peak
    ballast[::4096] = b"y" * len(ballast[::4096])
    measured = run_measured([sys.executable, "-c", ALLOCATE_40_MIB], log=tmp_path / "tool.log")
    assert measured.exit_code == 3
    assert 40 * 1024 <= measured.maxrss_kib < 150 * 1024
    assert measured.tree_rss_kib < 150 * 1024
    assert measured.cpu_seconds > 0
    assert not (tmp_path / "tool.log.maxrss").exists()
    del ballast


def test_a_missing_program_is_an_exit_code_not_an_exception(tmp_path: Path):
    measured = run_measured([str(tmp_path / "no-such-tool")], log=tmp_path / "missing.log")
    assert measured.exit_code != 0
