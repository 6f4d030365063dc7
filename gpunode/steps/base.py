"""The step author's surface: every name a step module (built-in or a playbook's `library/`) imports, from the
modules that hold them: steps/model.py (Action, StepContext, Step), steps/arguments.py (arg, coerce),
steps/kinds.py (register, build_step), steps/fixes.py (what a failure's output points at)."""

from __future__ import annotations

from gpunode.steps.arguments import Mode, arg, arg_doc, coerce
from gpunode.steps.fixes import failure_fix, killed_fix, missing_program_fix
from gpunode.steps.kinds import STEP_TYPES, StepTypes, argument_fix, build_step, register, step_facts_sections
from gpunode.steps.model import (
    PACKAGE_SOURCE_PATHS,
    SYSTEMD_DIRS,
    UNIT_SUFFIXES,
    Action,
    ArgumentError,
    Step,
    StepContext,
    StepFailed,
)

__all__ = [
    "PACKAGE_SOURCE_PATHS", "STEP_TYPES", "SYSTEMD_DIRS", "UNIT_SUFFIXES", "Action", "ArgumentError", "Mode", "Step",
    "StepContext", "StepFailed", "StepTypes", "arg", "arg_doc", "argument_fix", "build_step", "coerce",
    "failure_fix", "killed_fix", "missing_program_fix", "register", "step_facts_sections",
]
