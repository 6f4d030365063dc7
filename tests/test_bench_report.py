"""The bench's pure parts: summary rows (CPU per host, × floor), the must-show checks evaluated from rows, the
floor's own one-command-per-host check, and the --hosts/--tools/--tools-at plan. No timing is asserted: the
numbers below are made-up rows, the checks must read them right."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # bench/ is part of the checkout, not of the installed package

from bench import mustshow, report  # noqa: E402
from bench.run import host_sets, index_layout, plan_tools  # noqa: E402

FAR = report.far_case(50)


def run(tool: str, hosts: int, case: str, seconds: float, sessions: int, cpu: float = 0.5, run_id: str = "r") -> dict:
    """One run as bench/run.py records it."""
    return {"tool": tool, "hosts": hosts, "case": case, "run": run_id, "seconds": seconds, "exit_code": 0,
            "ok": True, "changed": 0, "exec_count": None, "sshd_sessions": sessions, "sshd_logins": hosts,
            "maxrss_kib": 50_000, "tree_rss_kib": 50_000, "cpu_s": cpu, "cpu_s_per_host": cpu / hosts}


def good_runs() -> list[dict]:
    """Runs where every must-show item holds."""
    runs = []
    for hosts in (1, 8, 32):
        runs += [run("floor", hosts, case, 0.4, hosts, 0.2) for case in ("first", "converged", FAR)]
        runs += [run("gpunode", hosts, "first", 4.0 * hosts ** 0.5, 9 * hosts, 1.0),
                 run("gpunode", hosts, "converged", 0.5, hosts, 0.08 * hosts if hosts < 32 else 0.07 * hosts),
                 run("gpunode", hosts, FAR, 0.7, hosts, 0.1 * hosts)]
    for hosts in (1, 8):
        runs += [run("ansible", hosts, "converged", 9.0, 9 * hosts), run("pyinfra", hosts, "first", 5.0 * hosts,
                                                                         18 * hosts),
                 run("pyinfra", hosts, FAR, 2.5, 10 * hosts)]
    return runs


def by_item(checks: list[dict]) -> dict[str, dict]:
    return {c["item"].split(")")[0] + ")": c for c in checks}


def test_summary_has_cpu_per_host_and_ratio_to_the_floor():
    runs = [run("floor", 8, "converged", 0.4, 8, 0.16, "c0"), run("floor", 8, "converged", 0.6, 8, 0.24, "c1"),
            run("floor", 8, "converged", 0.5, 8, 0.20, "c2"), run("gpunode", 8, "converged", 1.0, 8, 0.8)]
    rows = {r["tool"]: r for r in report.summarize(runs)}
    assert rows["floor"]["seconds"] == 0.5 and rows["floor"]["cpu_s"] == 0.2
    assert rows["floor"]["cpu_s_per_host"] == 0.025
    assert rows["gpunode"]["time_vs_floor"] == 2.0 and rows["floor"]["time_vs_floor"] == 1.0
    assert rows["floor"]["time_vs_gpunode"] == 0.5
    assert rows["floor"]["remote_commands_all"] == [8, 8, 8]
    assert list(rows) == ["floor", "gpunode"]  # the floor comes first in its case


def test_all_must_show_items_pass_on_good_rows():
    checks = by_item(mustshow.evaluate(report.summarize(good_runs()), FAR))
    assert set(checks) == {"(a)", "(b)", "(c)", "(d)", "(e)", "(f)", "(g)", "(floor)"}
    assert {item: c["status"] for item, c in checks.items()} == dict.fromkeys(checks, mustshow.PASS)
    assert checks["(a)"]["detail"] == "gpunode 0.50 s / floor 0.40 s = 1.25x (limit 1.5x)"
    assert checks["(b)"]["detail"] == "ansible 9.00 s / gpunode 0.50 s = 18.00x (needs 15x)"
    assert checks["(c)"]["detail"] == "pyinfra 2.50 s / gpunode 0.70 s = 3.57x (needs 2x)"
    assert checks["(e)"]["detail"] == "N=32 70.0 ms/host vs N=8 80.0 ms/host (each host past 8: 66.7 ms)"
    assert checks["(g)"]["item"] == "(g) N=32 converged: gpunode at most 1.5x the floor"
    assert checks["(g)"]["detail"] == "gpunode 0.50 s / floor 0.40 s = 1.25x (limit 1.5x)"


def test_scaling_checks_compare_the_largest_n_with_8():
    runs = good_runs() + [run("floor", 64, "converged", 0.5, 64, 0.2),
                          run("gpunode", 64, "converged", 0.9, 64, 0.085 * 64)]
    checks = by_item(mustshow.evaluate(report.summarize(runs), FAR))
    assert checks["(e)"]["item"] == "(e) gpunode controller CPU per host: N=64 converged no higher than N=8"
    assert checks["(e)"]["status"] == mustshow.FAIL
    assert checks["(e)"]["detail"] == "N=64 85.0 ms/host vs N=8 80.0 ms/host (each host past 8: 85.7 ms)"
    assert checks["(g)"]["status"] == mustshow.FAIL
    assert checks["(g)"]["detail"] == "gpunode 0.90 s / floor 0.50 s = 1.80x (limit 1.5x)"


def test_must_show_fails_name_the_values():
    runs = good_runs()
    for r in runs:
        if r["tool"] == "gpunode" and r["hosts"] == 8 and r["case"] == "converged":
            r.update(seconds=0.8, sshd_sessions=16)          # 2x the floor, two commands per host
        if r["tool"] == "gpunode" and r["hosts"] == 32 and r["case"] == "converged":
            r.update(cpu_s=0.09 * 32)                         # more CPU per host at 32 than at 8
        if r["tool"] == "gpunode" and r["hosts"] == 1 and r["case"] == "first":
            r.update(seconds=6.0)                             # slower than pyinfra's 5.0 at N=1
    checks = by_item(mustshow.evaluate(report.summarize(runs), FAR))
    assert checks["(a)"]["status"] == mustshow.FAIL and "= 2.00x" in checks["(a)"]["detail"]
    assert checks["(d)"]["status"] == mustshow.FAIL and "N=8 converged: 2" in checks["(d)"]["detail"]
    assert checks["(e)"]["status"] == mustshow.FAIL
    assert checks["(e)"]["detail"] == "N=32 90.0 ms/host vs N=8 80.0 ms/host (each host past 8: 93.3 ms)"
    assert checks["(f)"]["status"] == mustshow.FAIL
    assert "N=1: gpunode 6.00 s vs pyinfra 5.00 s" in checks["(f)"]["detail"]
    assert checks["(b)"] == {"item": checks["(b)"]["item"], "status": mustshow.FAIL,
                             "detail": "ansible 9.00 s / gpunode 0.80 s = 11.25x (needs 15x)"}
    assert checks["(c)"]["status"] == mustshow.PASS  # the far case was not touched


def test_a_single_run_with_two_commands_fails_one_per_host():
    runs = good_runs() + [run("gpunode", 8, "converged", 0.5, 9, 0.5, "again")]  # one host got a second command
    checks = by_item(mustshow.evaluate(report.summarize(runs), FAR))
    assert checks["(d)"]["status"] == mustshow.FAIL
    assert "N=8 converged: 1,1.125" in checks["(d)"]["detail"]


def test_missing_rows_are_not_run_not_pass():
    runs = [r for r in good_runs() if r["hosts"] != 32 and r["tool"] != "ansible"]
    checks = by_item(mustshow.evaluate(report.summarize(runs), FAR))
    assert checks["(b)"] == {"item": checks["(b)"]["item"], "status": mustshow.NOT_RUN,
                             "detail": "no N=8 converged row for ansible"}
    assert checks["(e)"]["status"] == mustshow.NOT_RUN
    assert checks["(g)"] == {"item": "(g) N=largest converged: gpunode at most 1.5x the floor",
                             "status": mustshow.NOT_RUN, "detail": "no gpunode converged row past N=8"}
    assert checks["(a)"]["status"] == mustshow.PASS
    assert mustshow.evaluate([], FAR)[0]["status"] == mustshow.NOT_RUN


def test_floor_check_counts_one_remote_command_per_host():
    ok = report.summarize([run("floor", 8, "first", 0.4, 8), run("floor", 32, FAR, 0.9, 32)])
    assert mustshow.floor_check(ok).status == mustshow.PASS
    assert mustshow.floor_check(ok).detail == f"N=8 first: 1; N=32 {FAR}: 1"
    extra = report.summarize([run("floor", 8, "converged", 0.4, 9)])  # a stray session: not the floor any more
    assert mustshow.floor_check(extra).status == mustshow.FAIL
    assert mustshow.floor_check([]).status == mustshow.NOT_RUN


def test_markdown_shows_floor_cpu_and_must_show(tmp_path: Path):
    result = {"started": "2026-11-23T18:00:00", "machine": "m", "versions": {"gpunode": "0"}, "repeat": 1,
              "rtt_ms": 50.0, "summary": report.summarize(good_runs()), "notes": []}
    paths = report.write(result, tmp_path)
    text = paths[2].read_text()
    assert "| wall s | × floor | × gpunode | CPU ms/host |" in text
    assert "| 8 | converged | gpunode | 0.50 | 1.25 | 1.00 | 80 | 8 |" in text
    assert "## Must show (issue 21)" in text
    assert f"- **PASS** (c) N=8 {FAR}: pyinfra at least 2x gpunode: " in text
    assert '"must_show"' in paths[0].read_text()


def test_plan_defaults_subsets_and_floor_rides_on_gpunode_hosts():
    counts, plan = plan_tools("1,8,32", "floor,gpunode,ansible,pyinfra", "32=floor,gpunode,pyinfra")
    assert counts == [1, 8, 32]
    assert plan[8] == ["floor", "gpunode", "ansible", "pyinfra"]
    assert plan[32] == ["floor", "gpunode", "pyinfra"]
    assert host_sets(plan[8]) == [("gpunode", ["floor"]), ("ansible", []), ("pyinfra", [])]
    assert host_sets(["floor", "pyinfra"]) == [("floor", []), ("pyinfra", [])]  # no gpunode: its own hosts
    assert plan_tools("1,8", "gpunode", "32=floor") == ([1, 8], {1: ["gpunode"], 8: ["gpunode"]})  # 32 not run


@pytest.mark.parametrize(("hosts", "tools", "tools_at", "message"), [
    ("1,x", "gpunode", "", "give host counts like 1,8,32"),
    ("0", "gpunode", "", "host counts of 1 or more"),
    ("8", "gpunode,chef", "", "unknown tool chef: choose from floor, gpunode, ansible, pyinfra"),
    ("8", "gpunode", "gpunode", "write N=TOOLS, e.g. 32=floor,gpunode,pyinfra"),
    ("8", "gpunode", "8=", "unknown tool (none given)"),
])
def test_plan_rejects_bad_options_naming_the_fix(hosts: str, tools: str, tools_at: str, message: str):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        plan_tools(hosts, tools, tools_at)


def test_host_sets_get_blocks_as_large_as_the_largest_n_inside_the_subnet():
    _, plan = plan_tools("1,8,32", "floor,gpunode,ansible,pyinfra", "32=floor,gpunode,pyinfra")
    assert index_layout(plan, "10.231.71.0/24") == {"gpunode": 1, "ansible": 34, "pyinfra": 67, "facts": 100}
    _, plan = plan_tools("8,64", "floor,gpunode,pyinfra", "")
    assert index_layout(plan, "10.231.63.0/24") == {"gpunode": 1, "pyinfra": 66, "facts": 131}
    assert index_layout(plan_tools("8", "floor", "")[1], "10.0.0.0/24") == {"floor": 1, "facts": 10}
    _, plan = plan_tools("8,100", "floor,gpunode,ansible,pyinfra", "")  # 3 blocks of 101 and the facts host
    with pytest.raises(ValueError, match=r"reach 10\.0\.1\.58, past 10\.0\.0\.0/24: give a larger --subnet"):
        index_layout(plan, "10.0.0.0/24")
    assert index_layout(plan, "10.0.0.0/23")["facts"] == 304
