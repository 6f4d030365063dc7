"""The Kubernetes drain (issue 40) as plan cases: each case's cluster in, the API calls kubectl would make out
(tests/data/kube_drain/cases.yaml; every case cites the kubectl or API server lines it follows)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from gpunode.kube_drain import DrainError, DrainOptions, drain, uncordon
from tests.kube_api_standin import StandIn

CASES = yaml.safe_load((Path(__file__).parent / "data" / "kube_drain" / "cases.yaml").read_text())
HEX40 = 40


def render(call) -> str:
    body = f" {json.dumps(call.body, separators=(',', ':'), sort_keys=True)}" if call.body is not None else ""
    return call.line() + body


def run_case(case):
    api = StandIn.from_case(case["cluster"])
    sleeps: list[float] = []
    clock = iter(range(10_000))
    opts = DrainOptions(**case.get("options", {}))
    try:
        if case["action"] == "uncordon":
            result = uncordon(api, "gpu-1")
        else:
            result = drain(api, "gpu-1", opts, check=case["action"] == "drain-check", sleep=sleeps.append,
                           clock=lambda: float(next(clock)))
        error = None
    except DrainError as exc:
        result, error = None, exc
    return api, result, error, sleeps


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_drain_case(case):
    expect = case["expect"]
    api, result, error, sleeps = run_case(case)
    if "error" in expect:
        assert error is not None and expect["error"] in str(error), error
        assert error.fix
    else:
        assert error is None, f"{error} ({getattr(error, 'fix', '')})"
    if "calls" in expect:
        assert [render(c) for c in api.calls] == expect["calls"]
    if "sleeps" in expect:
        assert sleeps == expect["sleeps"]
    for key in ("evicted", "skipped", "warnings"):
        if key in expect:
            assert getattr(result, key) == expect[key]
    if "planned" in expect:
        assert [render(c) for c in result.planned] == expect["planned"]
    if "node_unschedulable" in expect:
        assert bool(api.node["spec"].get("unschedulable")) is expect["node_unschedulable"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_case_shape(case):
    assert set(case) <= {"name", "says", "source", "action", "options", "cluster", "expect"}
    assert case["says"] and case["action"] in ("drain", "drain-check", "uncordon")
    source = case["source"]
    assert source.get("url", "").startswith("https://") or (
        source["repo"] and source["path"] and len(source["ref"]) == HEX40 and source["line"])


def test_the_blocking_budget_is_named_in_the_log_on_every_retry():
    case = next(c for c in CASES if c["name"] == "pdb-refuses-then-allows")
    _, result, error, _ = run_case(case)
    assert error is None
    refusals = [line for line in result.log if "refused (429, PodDisruptionBudget web-pdb)" in line]
    assert len(refusals) == 2 and "attempt 1 of 60" in refusals[0]


def test_a_drain_with_a_cluster_of_many_pods_evicts_each_once():
    pods = [{"name": f"p{i}", "labels": {"app": "web"}} for i in range(7)]
    api = StandIn.from_case({"node": {"name": "gpu-1"}, "pods": pods, "chunk": 3,
                             "pdbs": [{"name": "web", "match": {"app": "web"}, "desired": 5, "current": 7,
                                       "allowed": 7}]})
    result = drain(api, "gpu-1", DrainOptions(chunk_size=3), sleep=lambda s: None)
    assert result.evicted == [f"default/p{i}" for i in range(7)]
    posts = [c for c in api.calls if c.method == "POST"]
    assert len(posts) == 7
