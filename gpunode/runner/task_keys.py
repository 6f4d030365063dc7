"""Ansible's task keys on a finished step: `changed_when`, `failed_when`, `register` and `ignore_errors`.

The runner hands over the step's outcome, the results of the commands it ran and the error it raised (if any); this
decides the step's final status, the registered result (`rc`, `stdout`, `stderr`, `stdout_lines`, `stderr_lines`,
`changed`, `failed`, `skipped`, `msg`) and whether the error still stops the host.
"""

from __future__ import annotations

import re
from typing import Any

from gpunode.connection import ExecResult
from gpunode.errors import ConnectError, GpunodeError
from gpunode.playbook import StepSpec, evaluate
from gpunode.report.model import StepOutcome
from gpunode.steps.model import StepFailed


def registered(outcome: StepOutcome, results: list[ExecResult], check: bool) -> dict[str, Any]:
    """The step's result as Ansible registers it. A command that did not run (check mode, a guard held, skipped) has
    rc 0 and no output."""
    last = results[-1] if results else None
    stdout = last.stdout.rstrip("\r\n") if last else ""  # as Ansible's command module: final newlines stripped
    stderr = last.stderr.rstrip("\r\n") if last else ""
    return {"changed": outcome.status in ("changed", "would-change"), "failed": outcome.status == "failed",
            "skipped": outcome.status == "skipped", "rc": last.exit_code if last else 0, "stdout": stdout,
            "stderr": stderr, "stdout_lines": stdout.splitlines(), "stderr_lines": stderr.splitlines(),
            "msg": outcome.message, "check_mode": check}


def _holds(conditions: list[str], variables: dict[str, Any]) -> bool:
    return all(evaluate(c, variables) for c in conditions)


def _mentions(conditions: list[str], name: str | None) -> bool:
    return bool(name) and any(re.search(rf"\b{re.escape(str(name))}\b", c) for c in conditions)


def settle(spec: StepSpec, outcome: StepOutcome, results: list[ExecResult], error: GpunodeError | None,
           variables: dict[str, Any], check: bool) -> tuple[dict[str, Any], GpunodeError | None]:
    """Apply failed_when / changed_when / ignore_errors to a finished step. Returns the registered result and the
    error that still stops the host (None: it goes on). A condition that cannot be evaluated fails the step."""
    ran = bool(results) and not check and outcome.status != "skipped"
    scope = dict(variables)
    try:
        if spec.failed_when is not None and ran and not isinstance(error, ConnectError):
            scope[spec.register or "_"] = registered(outcome, results, check)
            error = _failed_when(spec, outcome, results, error, scope)
        if spec.changed_when is not None and outcome.status != "failed":
            _changed_when(spec, outcome, results, scope, check, ran)
    except (ValueError, GpunodeError) as exc:  # a TemplateError in a condition
        outcome.status, outcome.message = "failed", str(exc)
        error = StepFailed(str(exc), fix="fix the failed_when / changed_when condition")
    if error is not None and spec.ignore_errors and not isinstance(error, ConnectError) and \
            outcome.status == "failed":
        outcome.ignored = True
        outcome.message = f"{outcome.message} (ignored: ignore_errors)".strip()
        error = None
    return registered(outcome, results, check), error


def _changed_when(spec: StepSpec, outcome: StepOutcome, results: list[ExecResult], scope: dict[str, Any],
                  check: bool, ran: bool) -> None:
    """changed_when decides `changed` for a command that ran. In check mode (nothing ran) only a condition that does
    not read the step's own result (`changed_when: false`) is evaluated, for a step that would run."""
    conditions = spec.changed_when or []
    if not ran and not (check and outcome.status == "would-change" and not _mentions(conditions, spec.register)):
        return
    scope[spec.register or "_"] = registered(outcome, results, check)
    changed = _holds(conditions, scope)
    outcome.status = ("would-change" if check else "changed") if changed else "ok"
    unknown = "would change (unknown until run): "
    if not changed and outcome.message.startswith(unknown):  # ok: the prediction must not say "would change"
        outcome.message = "changes nothing (changed_when); it " + outcome.message.removeprefix(unknown)


def _failed_when(spec: StepSpec, outcome: StepOutcome, results: list[ExecResult], error: GpunodeError | None,
                 scope: dict[str, Any]) -> GpunodeError | None:
    """failed_when replaces the exit code's verdict: true fails a step that succeeded, false passes one that failed."""
    conditions = spec.failed_when or []
    if _holds(conditions, scope):
        outcome.status = "failed"
        message = f"failed_when is true: {' and '.join(conditions)}"
        outcome.message = message if error is None else outcome.message
        return error or StepFailed(message, fix="the step's own failed_when condition held for this result")
    if error is not None:
        code = results[-1].exit_code if results else "?"
        outcome.status = "changed"
        outcome.message = f"exit {code}, not a failure: failed_when is false"
    return None
