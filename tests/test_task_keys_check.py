"""Trial of issues 26-28: in --check, a step that reads an unknown registered result but has `changed_when: false`
was shown `ok - would change (unknown until run): ...`: the status and its message contradicted each other."""

from __future__ import annotations

from gpunode.playbook.load import StepSpec
from gpunode.report.model import StepOutcome
from gpunode.runner.task_keys import settle

UNKNOWN = "would change (unknown until run): reads e, the result of a step that --check does not run"


def _settle(changed_when: list[str]) -> StepOutcome:
    spec = StepSpec("command", {"cmd": "true"}, "after", "e is failed", [], "p.yml", 3, changed_when=changed_when)
    outcome = StepOutcome("after", "command", "would-change", message=UNKNOWN)
    _, error = settle(spec, outcome, [], None, {}, check=True)
    assert error is None
    return outcome


def test_changed_when_false_predicts_ok_without_saying_would_change():
    outcome = _settle(["false"])
    assert outcome.status == "ok"
    assert "would change" not in outcome.message and "changed_when" in outcome.message and "reads e" in outcome.message


def test_a_step_that_may_change_keeps_its_unknown_prediction():
    outcome = _settle(["true"])
    assert outcome.status == "would-change" and outcome.message == UNKNOWN
