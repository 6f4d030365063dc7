"""Steps: each plans from facts and probe output, then applies. A step type's module is imported when a playbook
first uses it (`STEP_MODULES` in base.py)."""

from gpunode.steps.base import STEP_TYPES, Action, Step, StepContext, StepFailed, build_step, step_facts_sections

__all__ = ["STEP_TYPES", "Action", "Step", "StepContext", "StepFailed", "build_step", "step_facts_sections"]
