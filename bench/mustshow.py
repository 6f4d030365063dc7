"""Issue 21's "must show" items, evaluated from the bench's summary rows (bench/report.py's `summarize`).

Each check is PASS or FAIL with the values it compared, or NOT RUN when the rows it needs are missing (a tool or a
host count left out of the run).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

PASS, FAIL, NOT_RUN = "PASS", "FAIL", "NOT RUN"
FLOOR_LIMIT = 1.5        # N=8 converged: gpunode wall <= 1.5 x the floor's
ANSIBLE_FACTOR = 15.0    # N=8 converged: tuned ansible-playbook wall >= 15 x gpunode's
PYINFRA_FACTOR = 2.0     # N=8 converged through the RTT relay: pyinfra wall >= 2 x gpunode's


@dataclass
class Check:
    """One must-show line."""

    item: str
    status: str
    detail: str


def evaluate(summary: list[dict], far_case: str) -> list[dict]:
    """Every must-show check, plus the floor's own sanity check, as dicts (for results.json)."""
    checks = [
        _ratio("(a) N=8 converged: gpunode at most 1.5x the floor", summary, 8, "converged", "gpunode", "floor",
               lambda ratio: ratio <= FLOOR_LIMIT, f"limit {FLOOR_LIMIT:g}x"),
        _ratio("(b) N=8 converged: tuned ansible-playbook at least 15x gpunode", summary, 8, "converged", "ansible",
               "gpunode", lambda ratio: ratio >= ANSIBLE_FACTOR, f"needs {ANSIBLE_FACTOR:g}x"),
        _ratio(f"(c) N=8 {far_case}: pyinfra at least 2x gpunode", summary, 8, far_case, "pyinfra", "gpunode",
               lambda ratio: ratio >= PYINFRA_FACTOR, f"needs {PYINFRA_FACTOR:g}x"),
        _one_per_host("(d) gpunode: one remote command per converged host (sshd count)", summary, "gpunode",
                      lambda case: case.startswith("converged")),
        _cpu_per_host(summary),
        _first_apply(summary),
        _floor_at_scale(summary),
        floor_check(summary),
    ]
    return [asdict(c) for c in checks]


def floor_check(summary: list[dict]) -> Check:
    """The floor itself: exactly one remote command per host in every one of its runs (else it is no floor)."""
    return _one_per_host("(floor) the floor row sends exactly one remote command per host", summary, "floor",
                         lambda case: True)


def _row(summary: list[dict], hosts: int, case: str, tool: str) -> dict | None:
    return next((r for r in summary if (r["hosts"], r["case"], r["tool"]) == (hosts, case, tool)), None)


def _ratio(item: str, summary: list[dict], hosts: int, case: str, numerator: str, denominator: str, passes,
           rule: str) -> Check:
    top, bottom = _row(summary, hosts, case, numerator), _row(summary, hosts, case, denominator)
    missing = [name for name, row in ((numerator, top), (denominator, bottom)) if row is None]
    if missing:
        return Check(item, NOT_RUN, f"no N={hosts} {case} row for {', '.join(missing)}")
    assert top is not None and bottom is not None
    ratio = top["seconds"] / bottom["seconds"] if bottom["seconds"] else float("inf")
    detail = (f"{numerator} {top['seconds']:.2f} s / {denominator} {bottom['seconds']:.2f} s = {ratio:.2f}x "
              f"({rule})")
    return Check(item, PASS if passes(ratio) else FAIL, detail)


def _one_per_host(item: str, summary: list[dict], tool: str, case_wanted) -> Check:
    rows = [r for r in summary if r["tool"] == tool and case_wanted(r["case"])]
    if not rows:
        return Check(item, NOT_RUN, f"no {tool} rows")
    parts, ok = [], True
    for row in rows:
        counts = row.get("remote_commands_all") or [row["remote_commands"]]
        per_host = [c / row["hosts"] for c in counts]
        ok = ok and all(p == 1 for p in per_host)
        parts.append(f"N={row['hosts']} {row['case']}: {','.join(f'{p:g}' for p in per_host)}")
    return Check(item, PASS if ok else FAIL, "; ".join(parts))


def _largest(summary: list[dict], tool: str, case: str) -> int | None:
    """The largest host count past 8 with a `tool` row in `case` (the scaling checks compare it with N=8)."""
    return max((r["hosts"] for r in summary if r["tool"] == tool and r["case"] == case and r["hosts"] > 8),
               default=None)


def _cpu_per_host(summary: list[dict]) -> Check:
    top = _largest(summary, "gpunode", "converged")
    item = f"(e) gpunode controller CPU per host: N={top or 'largest'} converged no higher than N=8"
    at8, attop = _row(summary, 8, "converged", "gpunode"), top and _row(summary, top, "converged", "gpunode")
    if not at8 or not attop or "cpu_s_per_host" not in at8 or "cpu_s_per_host" not in attop:
        return Check(item, NOT_RUN, "needs gpunode converged rows with CPU at N=8 and a larger N")
    detail = (f"N={top} {attop['cpu_s_per_host'] * 1000:.1f} ms/host vs N=8 {at8['cpu_s_per_host'] * 1000:.1f} "
              "ms/host")
    if "cpu_s" in at8 and "cpu_s" in attop:  # per host includes the start-up, spread over N: show the increment too
        detail += f" (each host past 8: {(attop['cpu_s'] - at8['cpu_s']) / (top - 8) * 1000:.1f} ms)"
    return Check(item, PASS if attop["cpu_s_per_host"] <= at8["cpu_s_per_host"] else FAIL, detail)


def _floor_at_scale(summary: list[dict]) -> Check:
    """Issue 30: the N=8 limit over the floor (a) must also hold at the largest N run."""
    top = _largest(summary, "gpunode", "converged")
    item = f"(g) N={top or 'largest'} converged: gpunode at most 1.5x the floor"
    if top is None:
        return Check(item, NOT_RUN, "no gpunode converged row past N=8")
    return _ratio(item, summary, top, "converged", "gpunode", "floor", lambda ratio: ratio <= FLOOR_LIMIT,
                  f"limit {FLOOR_LIMIT:g}x")


def _first_apply(summary: list[dict]) -> Check:
    item = "(f) first apply at N=1 and N=8: gpunode no slower than pyinfra"
    parts, statuses = [], []
    for hosts in (1, 8):
        ours, theirs = _row(summary, hosts, "first", "gpunode"), _row(summary, hosts, "first", "pyinfra")
        if ours is None or theirs is None:
            parts.append(f"N={hosts}: not run")
            statuses.append(NOT_RUN)
            continue
        statuses.append(PASS if ours["seconds"] <= theirs["seconds"] else FAIL)
        parts.append(f"N={hosts}: gpunode {ours['seconds']:.2f} s vs pyinfra {theirs['seconds']:.2f} s")
    status = FAIL if FAIL in statuses else NOT_RUN if NOT_RUN in statuses else PASS
    return Check(item, status, "; ".join(parts))
