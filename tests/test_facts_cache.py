"""The controller's cache of each host's last facts (runner/facts_cache.py): best effort, never in the way."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunode.inventory import Host
from gpunode.runner import facts_cache

HOST = Host(name="gpu-1", address="10.0.0.5")


def test_round_trip_and_one_file_per_host_identity(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    facts_cache.save(HOST, "@@gpunode-facts 1\n")
    assert facts_cache.load(HOST) == "@@gpunode-facts 1\n"
    assert facts_cache.load(Host(name="gpu-1", address="10.0.0.6")) is None  # same name, another machine
    assert [p.name for p in (tmp_path / "gpunode" / "facts").iterdir() if p.name.startswith(".")] == []


def test_a_failed_write_leaves_no_temporary_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    facts_cache.save(HOST, "first\n")
    (target,) = (tmp_path / "gpunode" / "facts").iterdir()
    target.unlink()
    target.mkdir()  # os.replace onto a folder fails
    facts_cache.save(HOST, "second\n")
    assert sorted(p.name for p in target.parent.iterdir()) == [target.name]
    assert facts_cache.load(HOST) is None


def test_no_cache_rather_than_a_made_up_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # the XDG spec: relative values are ignored
    monkeypatch.setenv("HOME", str(tmp_path / "nonexistent"))
    monkeypatch.chdir(tmp_path)
    facts_cache.save(HOST, "facts\n")
    assert facts_cache.load(HOST) is None
    assert list(tmp_path.iterdir()) == []


def test_an_oversized_file_is_no_guess(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    facts_cache.save(HOST, "x" * (facts_cache.MAX_BYTES + 1))
    assert facts_cache.load(HOST) is None
