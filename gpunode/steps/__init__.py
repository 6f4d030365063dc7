"""Steps: each plans from facts and probe output, then applies. Importing registers them."""

import gpunode.steps.nfs  # noqa: F401 - registration (nfs_mount)
from gpunode.steps import command, files, packages, service, system  # noqa: F401 - registration
from gpunode.steps.base import STEP_TYPES, Action, Step, StepContext, StepFailed, build_step

__all__ = ["STEP_TYPES", "Action", "Step", "StepContext", "StepFailed", "build_step"]
