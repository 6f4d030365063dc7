"""Steps: each plans from facts and probe output, then applies. Importing registers them."""

import gpunode.steps.nfs  # noqa: F401 - registration (nfs_mount)
from gpunode.steps import (  # noqa: F401 - registration
    command,
    containers,
    files,
    image,
    json_merge,
    kernel,
    nvidia,
    packages,
    service,
    system,
)
from gpunode.steps.base import STEP_TYPES, Action, Step, StepContext, StepFailed, build_step, step_facts_sections

__all__ = ["STEP_TYPES", "Action", "Step", "StepContext", "StepFailed", "build_step", "step_facts_sections"]
