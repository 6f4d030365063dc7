"""Steps: each plans from facts and probe output, then applies. A step kind is declared by its class's `kind`
attribute, found by reading the modules (registry.py); its module is imported when a playbook first uses it."""

from gpunode.steps.kinds import STEP_TYPES, build_step, step_facts_sections
from gpunode.steps.model import Action, Step, StepContext, StepFailed

__all__ = ["STEP_TYPES", "Action", "Step", "StepContext", "StepFailed", "build_step", "step_facts_sections"]
