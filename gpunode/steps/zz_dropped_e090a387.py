"""A step module dropped in by tests/test_step_registry.py (removed when the test ends)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from gpunode.steps.base import Action, Step, StepContext, arg, register


@register
@dataclass
class DroppedStep(Step):
    """Touch a file (a step that no table lists)."""

    kind = "zz_dropped_e090a387"
    needs_root = False
    facts_sections = frozenset()
    path: str = arg(doc="the file to create")

    def plan(self, ctx: StepContext) -> list[Action]:
        return [Action(summary=f"touch {self.path}", command=f"touch {shlex.quote(self.path)}")]
