"""bench/bench_parse.py runs and reports every XML capture (timing itself is not asserted)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "data" / "nvidia"


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_parse", REPO / "bench" / "bench_parse.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bench_reports_each_xml_capture(capsys: pytest.CaptureFixture[str]):
    assert (FIXTURES / "xml").is_dir(), "the capture corpus is part of the repository: restore tests/data"
    bench = load_bench()
    assert bench.main(["--repeat", "1", str(FIXTURES / "xml")]) == 0
    lines = capsys.readouterr().out.splitlines()
    names = sorted(p.name for p in (FIXTURES / "xml").glob("*.xml"))
    assert [line.split()[0] for line in lines[:-1]] == names
    assert all(line.rstrip().split()[-1] == "ms" or "target" in line for line in lines[:-1])
    assert lines[-1].startswith("slowest")


def test_bench_missing_directory(tmp_path: Path):
    assert load_bench().main([str(tmp_path / "nope")]) == 2
