"""Trial of issues 26-28: a failure that `ignore_errors: true` let pass was printed live as a plain `failed` and
then counted in no column of the summary (ok + changed + skipped + failed fell one short), where Ansible prints
`...ignoring` and its recap has `ignored=N`."""

from __future__ import annotations

import io

from rich.console import Console

from gpunode.report.live import PlainEvents
from gpunode.report.model import HostOutcome, RunResult, StepOutcome
from gpunode.report.summary import print_summary


def _host() -> HostOutcome:
    return HostOutcome(host="h1", status="ok", steps=[
        StepOutcome("probe", "command", "failed", actions=[{"summary": "run: false", "reason": ""}],
                    message="exit 1 (ignored: ignore_errors)", ignored=True),
        StepOutcome("after", "command", "ok")])


def test_the_live_line_says_the_failure_was_ignored():
    out = io.StringIO()
    PlainEvents(stream=out).step_finished("h1", _host().steps[0])
    assert "probe: failed (ignored: ignore_errors) - run: false" in out.getvalue()
    out = io.StringIO()
    PlainEvents(stream=out).step_finished("h1", StepOutcome("x", "command", "failed", message="boom"))
    assert "x: failed - boom" in out.getvalue() and "ignored" not in out.getvalue()


def test_the_summary_counts_ignored_failures():
    out = io.StringIO()
    print_summary(RunResult("p.yml", False, [_host()]), Console(file=out, width=200, color_system=None))
    header, row = [line for line in out.getvalue().splitlines() if "h1" in line or "ignored" in line][:2]
    names, values = [c.strip() for c in header.split("┃")[1:-1]], [c.strip() for c in row.split("│")[1:-1]]
    cells = dict(zip(names, values, strict=True))
    assert cells["ok"] == "1" and cells["failed"] == "0" and cells["ignored"] == "1", cells


def test_a_real_runs_diff_says_before_and_after():
    # Trial of issues 26-28: `provision --diff` printed what a real run changed under `(now)` / `(planned)` headers
    diff = "--- /etc/x (now)\n+++ /etc/x (planned)\n@@ -1 +1 @@\n-a\n+b\n"
    for status, old, new in (("changed", "(before)", "(after)"), ("would-change", "(now)", "(planned)")):
        host = HostOutcome(host="h1", status="changed", steps=[
            StepOutcome("write", "file", status, actions=[{"summary": "update /etc/x", "reason": ""}], diffs=[diff])])
        out = io.StringIO()
        print_summary(RunResult("p.yml", status != "changed", [host]), Console(file=out, width=200, color_system=None),
                      show_diffs=True)
        assert f"--- /etc/x {old}" in out.getvalue() and f"+++ /etc/x {new}" in out.getvalue(), out.getvalue()


def test_check_mode_prints_a_would_header_only_with_something_under_it() -> None:
    """--check: an "unknown until run" step (no actions, no diff) printed `... would:` with nothing under it."""
    unknown = StepOutcome("echo it", "command", "would-change", where="p.yml:5",
                          message="would change (unknown until run): reads r, the result of a step that would run")
    empty = StepOutcome("empty", "command", "would-change", where="p.yml:7")
    host = HostOutcome("a", status="would-change", steps=[unknown, empty])
    out = io.StringIO()
    print_summary(RunResult("p.yml", True, [host]), Console(file=out, width=200, color_system=None))
    lines = out.getvalue().splitlines()
    header = lines.index("a echo it (p.yml:5) would:")
    assert "unknown until run" in lines[header + 1]
    assert "a empty (p.yml:7) would:" not in lines
