"""Every hand-written run case under tests/runs/<topic>.yaml: the runner (runner/host_run.py, unmodified) on a
stand-in host (tests/standin.py) must reach the case's outcome: each step's status, the host's, the commands sent,
the exec count, notes and error. No root, no SSH, milliseconds a case; the lab tests keep what only real hosts show.
The format: tests/run_cases.py.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest

from gpunode.errors import ConnectError
from tests.run_cases import all_cases, case_files, mismatches, problems, run_case, shown
from tests.standin import Reply, StandinConnection, minimal_facts

CASES = all_cases()
ALL_CASES_SECONDS = 5.0


@pytest.fixture(autouse=True)
def _own_facts_cache(tmp_path, monkeypatch):
    """The facts cache (runner/facts_cache.py) in the test's own folder, never the user's."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


@pytest.mark.parametrize("case", CASES, ids=[f"{c['topic']}/{c.get('name')}" for c in CASES])
def test_run_case(case, tmp_path):
    outcome, conn = run_case(case, tmp_path)
    assert not conn.unmatched, f"{case['topic']}/{case['name']}: the runner sent what no reply answers: " \
        f"{conn.unmatched}\ngot:\n{shown(outcome)}"
    wrong = mismatches(case["expect"], outcome)
    assert not wrong, f"{case['topic']}/{case['name']} ({case['says']}):\n" + "\n".join(wrong) + \
        f"\ngot:\n{shown(outcome)}"


@pytest.mark.parametrize("case", CASES, ids=[f"{c['topic']}/{c.get('name')}" for c in CASES])
def test_case_shape(case):
    found = problems(case)
    assert not found, f"{case['topic']}/{case.get('name')}: " + "; ".join(found)


@pytest.mark.parametrize("path", case_files(), ids=[p.stem for p in case_files()])
def test_case_names_are_unique(path):
    counts = Counter(c["name"] for c in CASES if c["topic"] == path.stem)
    assert not [n for n, k in counts.items() if k > 1], counts


def test_every_case_together_runs_in_seconds(tmp_path):
    """The point of run cases: the runner's semantics checked in seconds, without root (the issue asks < 5 s)."""
    started = time.monotonic()
    for number, case in enumerate(CASES):
        folder = tmp_path / str(number)
        folder.mkdir()
        run_case(case, folder)
    seconds = time.monotonic() - started
    assert len(CASES) >= 10
    assert seconds < ALL_CASES_SECONDS, f"{len(CASES)} run cases took {seconds:.2f}s"


def test_the_standin_names_a_command_nobody_scripted():
    """An unscripted command fails loudly, named; a reply with `times` is spent; Ctrl-C ends the command."""
    conn = StandinConnection("h", lambda boot: minimal_facts("ID=debian\n", boot=boot),
                             [Reply(label="once", stdout="a\n", times=1), Reply(command="^stop$", interrupt=True)])
    assert conn.run("echo", label="once").stdout == "a\n"
    with pytest.raises(AssertionError, match="no scripted reply for 'once'"):
        conn.run("echo", label="once")
    assert conn.unmatched == ["'once': echo"]
    with pytest.raises(ConnectError):
        conn.run("stop")
    assert conn.cancel.is_set()
    assert [e.label for e in conn.execs] == ["once", "once", "stop"]
