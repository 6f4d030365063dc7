"""The last line of a run: hosts a stopped rollout never ran are cancelled, not failed."""

from __future__ import annotations

from gpunode.report.model import HostOutcome, RunResult
from gpunode.report.summary import total_line


def test_a_stopped_rollout_counts_its_cancelled_hosts_apart() -> None:
    """As a canary whose gate failed leaves it (run on lab hosts tr-h1..3: the table said failed, cancelled,
    cancelled while the line said `0 ok, 3 failed (tr-h1, tr-h2, tr-h3)`)."""
    hosts = [HostOutcome("tr-h1", status="failed"), HostOutcome("tr-h2", status="cancelled"),
             HostOutcome("tr-h3", status="cancelled")]
    result = RunResult("roll.yml", False, hosts, 0.9)
    assert total_line(result) == "0 ok, 1 failed (tr-h1), 2 cancelled (tr-h2, tr-h3) in 0.9s"
    assert result.exit_code == 1


def test_ordinary_runs_keep_their_line() -> None:
    hosts = [HostOutcome("a", status="changed"), HostOutcome("b", status="unreachable"), HostOutcome("c")]
    assert total_line(RunResult("p.yml", False, hosts, 2.0)) == "2 ok, 1 failed (b) in 2.0s"
    assert total_line(RunResult("p.yml", False, hosts[:1], 1.0)) == "1 ok, 0 failed in 1.0s"
