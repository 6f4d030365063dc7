"""Every plan case under tests/plans: the current planner must plan exactly the commands the case states.

The expected commands of each case were read against the vendor file its `anchor` names (NVIDIA's and AWS's
own provisioning code); a changed command makes its case fail here. Refresh with `python -m tests.plan_scenarios`
and review `git diff tests/plans` against the anchors.
"""

from __future__ import annotations

import json
import subprocess
from collections import Counter

import pytest

from tests.plan_cases import case_files, hand_written_matches, load, run_case

CASES = case_files()
DISTROS = ("ubuntu2204", "ubuntu2404", "debian12", "debian13", "rocky9", "rhel9", "rhel8", "al2023",
           "al2023-k612", "al2", "alinux3", "tencentos3", "tencentos4")
STEPS = ("wait_for_package_manager", "kernel_headers", "nvidia_driver", "reboot", "docker", "container_toolkit",
         "container_runtime", "packages", "line", "service")


@pytest.mark.parametrize("path", CASES, ids=[f"{p.parent.name}/{p.stem}" for p in CASES])
def test_plan_case(path):
    case = load(path)
    assert case["anchor"]["repository"] and case["anchor"]["path"], "every case names the file checked against"
    if case.get("written_by_hand"):
        ok, got = hand_written_matches(case)
        assert ok, f"{path}: the plan is not what {case['anchor']} says; planned: {json.dumps(got, indent=1)}"
        return
    assert run_case(case) == case["expected"], f"{path}: the planned commands changed; anchor: {case['anchor']}"


HAND_WRITTEN = [p for p in CASES if load(p).get("written_by_hand")]


@pytest.mark.parametrize("path", HAND_WRITTEN, ids=[f"{p.parent.name}/{p.stem}" for p in HAND_WRITTEN])
def test_hand_written_cases_cite_the_vendor_line(path):
    """A hand-written case names the vendor file at a commit and line (or a documentation page)."""
    anchor = load(path)["anchor"]
    assert anchor.get("url", "").startswith("https://") or (
        anchor.get("commit") and anchor.get("line")), f"{path}: anchor needs commit and line, or url"


def test_every_distro_has_fresh_and_converged_cases_for_every_step():
    assert len(CASES) >= 150
    seen = Counter()
    for path in CASES:
        distro = next(d for d in sorted(DISTROS, key=len, reverse=True) if path.stem.startswith(d + "-"))
        kind = path.stem[len(distro) + 1:]
        seen[(path.parent.name, distro, "fresh" if "fresh" in kind else "converged" if "converged" in kind
              else "other")] += 1
    missing = [(s, d, k) for s in STEPS for d in DISTROS for k in ("fresh", "converged") if not seen[(s, d, k)]]
    assert not missing, missing


@pytest.mark.parametrize("distro", ["rocky9", "al2023", "al2023-k612", "ubuntu2204"])
def test_converged_hosts_plan_nothing(distro):
    converged = [p for p in CASES if p.stem == f"{distro}-converged" or p.stem.endswith(f"{distro}-hold-converged")]
    assert len(converged) >= len(STEPS)
    for path in converged:
        expected = load(path)["expected"]
        assert expected["actions"] == [] and expected["error"] is None, path


def test_no_amazon_linux_2_case_runs_dnf():
    for path in CASES:
        if path.stem.startswith("al2-"):
            text = json.dumps(load(path)["expected"])
            assert "dnf " not in text, path


def test_every_planned_command_is_valid_sh():
    """`sh -n` (dash) parses every command of every case (scripts elided as a quoted word)."""
    commands = [a["command"].replace("<scripts/", "'scripts/").replace(".sh>", ".sh'")
                for p in CASES for a in load(p)["expected"].get("actions", []) if a.get("command")]
    script = "".join(f"true || {{ {c}\n}}\n" for c in commands)
    result = subprocess.run(["sh", "-n"], input=script, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
