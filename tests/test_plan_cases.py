"""Every hand-written plan case under tests/plans/<kind>.yaml: the planner must plan what the case's source decides.

A case names its source (the vendor's file at a commit and line, or the tool's documentation); its expected
actions were written from that source and state each action's reason, and its diff where the planner shows one.
A case marked `xfail: "<why>"` states what the source decides where the planner does not do it yet (strict: it
fails once the planner is fixed, so the mark is removed then). The format: tests/plan_cases.py.
"""

from __future__ import annotations

import subprocess
from collections import Counter

import pytest

from tests.plan_cases import (
    CASES_DIR,
    MAX_LINES,
    all_cases,
    case_files,
    load_cases,
    mismatches,
    problems,
    run_case,
    shown,
    tree_lines,
)

CASES = all_cases()


def _param(case):
    marks = [pytest.mark.xfail(reason=str(case["xfail"]), strict=True, raises=AssertionError)] \
        if case.get("xfail") else []
    return pytest.param(case, id=f"{case['kind']}/{case.get('name')}", marks=marks)


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_plan_case(case):
    got = run_case(case)
    wrong = mismatches(case.get("expect") or {}, got)
    assert not wrong, f"{case['kind']}/{case['name']} ({case.get('source')}):\n" + "\n".join(wrong) + \
        f"\nplanned:\n{shown(got)}"


@pytest.mark.parametrize("case", CASES, ids=[f"{c['kind']}/{c.get('name')}" for c in CASES])
def test_case_shape(case):
    """name, says, source (repo+path+ref+line, or an https url); every expected action asserts its reason, and its
    diff and command where the planner gives them; probe sections are ones the step asks for."""
    found = problems(case, run_case(case))
    assert not found, f"{case['kind']}/{case.get('name')}: " + "; ".join(found)


@pytest.mark.parametrize("path", case_files(), ids=[p.stem for p in case_files()])
def test_case_names_are_unique_in_a_file(path):
    counts = Counter(c.get("name") for c in load_cases(path))
    assert not [n for n, k in counts.items() if k > 1], counts


def test_the_plans_tree_stays_small():
    """Cases a person writes and reads: the whole tests/plans tree at most MAX_LINES lines."""
    assert not list(CASES_DIR.glob("**/*.json")), "plan cases are YAML written by hand: no frozen snapshots"
    assert tree_lines() <= MAX_LINES


def test_every_planned_command_and_probe_is_valid_sh():
    """`sh -n` (dash) parses every command and probe snippet the cases plan (scripts elided as a quoted word)."""
    texts = []
    for case in CASES:
        got = run_case(case)
        texts += [a["command"] for a in got["actions"] if a["command"]]
        texts += list((got["probe"] or {}).values())
    assert texts
    script = "".join(f"true || {{ {t.replace('<scripts/', chr(39) + 'scripts/').replace('.sh>', '.sh' + chr(39))}\n}}\n"
                     for t in texts)
    result = subprocess.run(["sh", "-n"], input=script, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_the_checks_catch_a_careless_case():
    """A case without a source, an action without its reason or its diff, a typo'd key or probe section: each named."""
    careless = {"kind": "file", "name": "x", "says": "y", "source": {"repo": "a/b", "path": "c", "ref": "main"},
                "args": {"path": "/etc/x", "content": "new\n"}, "probe": {"fiel": "absent\n"},
                "expect": {"actions": [{"summary": "create /etc/x", "comand": "true"}]}}
    found = "; ".join(problems(careless, run_case(careless)))
    for part in ("source needs repo, path, ref", "unknown key 'comand'", "no `reason`", "assert it (`diff:`)",
                 "(`command:` or `contains:`)", "probe section 'fiel'"):
        assert part in found, found
    got = {"actions": [{"summary": "s", "command": "a b c", "reason": "r"}], "error": None}
    assert not mismatches({"actions": [{"contains": ["a", "c"], "reason": "r"}]}, got)
    assert mismatches({"actions": [{"contains": ["c", "a"], "reason": "r"}]}, got)
    assert mismatches({"actions": []}, got) and mismatches({"error": {"message": "m"}}, got)
