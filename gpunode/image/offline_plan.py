"""`gpunode plan --image BASE --playbook P`: what a bake would do to a base image, planned offline from the image's
pinned state (gpunode/image/states/), no host contacted. Each step is planned as check mode plans it: its `when:`
evaluated against the image's facts, its probe answered from the state, its actions planned in order, later steps
seeing what earlier ones would install."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpunode.connection import q
from gpunode.errors import GpunodeError
from gpunode.image.image_state import ImageState, answer, facts_of, load_state
from gpunode.inventory import Host
from gpunode.playbook import evaluate, load_playbook, render, resolve_variables
from gpunode.scripts import SCRIPTS_DIR, script_text
from gpunode.steps import StepContext, build_step
from gpunode.steps.probe import ProbeOutput
from gpunode.steps.state import HostState


@dataclass
class PlannedImageStep:
    """One step of the plan: skipped (its `when:` is false), its actions, or the reason it refuses."""

    name: str
    kind: str
    skipped: bool = False
    actions: list[dict[str, Any]] = field(default_factory=list)
    error: dict[str, str] | None = None
    notes: list[str] = field(default_factory=list)
    unanswered: list[str] = field(default_factory=list)  # probe commands the pinned state did not answer


@dataclass
class ImagePlan:
    base: str
    playbook: str
    steps: list[PlannedImageStep]

    def installs(self) -> list[str]:
        """The install/swap commands of the plan, in order."""
        return [a["command"] for s in self.steps for a in s.actions
                if a["command"] and (" install " in a["command"] or " swap " in a["command"])]

    def as_dict(self) -> dict[str, Any]:
        return {"base": self.base, "playbook": self.playbook, "offline": True,
                "steps": [vars(s) for s in self.steps]}


def plan_image(base: str, playbook: str, extra_vars: dict[str, Any] | None = None) -> ImagePlan:
    """The plan of `playbook` (a built-in name or a path) on `base`'s pinned state."""
    state = load_state(base)
    book = load_playbook(playbook)
    facts = facts_of(state)
    host = Host(name=f"image:{base}", address=f"image:{base}")
    shared = HostState()
    steps = []
    for spec in book.steps:
        variables = resolve_variables({**book.vars, **spec.vars, **(extra_vars or {}), "facts": facts,
                                       "inventory_hostname": host.name, "check_mode": True})
        planned = PlannedImageStep(spec.name, spec.kind)
        steps.append(planned)
        if spec.when is not None and not evaluate(str(spec.when), variables):
            planned.skipped = True
            continue
        _plan_step(planned, state, build_step(spec.kind, render(spec.args, variables)),
                   StepContext(host, facts, conn=None, check=True, state=shared))  # type: ignore[arg-type]
    return ImagePlan(base, book.name, steps)


def _plan_step(planned: PlannedImageStep, state: ImageState, step: Any, ctx: StepContext) -> None:
    state.unanswered = []
    snippets = step.probe(ctx.facts) or {}
    ctx.probe = ProbeOutput({name: answer(state, snippet) for name, snippet in snippets.items()},
                            asked=snippets, step=planned.kind)
    planned.unanswered = list(state.unanswered)
    try:
        actions = step.plan(ctx)
    except GpunodeError as exc:
        planned.error = {"message": str(exc.cause), "fix": exc.fix}
        return
    planned.actions = [{"summary": a.summary, "reason": a.reason, "command": _elided(a.command)} for a in actions]
    planned.notes = list(ctx.notes)
    ctx.notes.clear()


def _elided(command: str | None) -> str | None:
    """A command with each shipped script's text shown as `<scripts/NAME>` (gpunode/_scripts)."""
    for path in sorted(SCRIPTS_DIR.glob("*.sh")) if command else ():
        command = command.replace(q(script_text(path.name)), f"<scripts/{path.name}>")  # type: ignore[union-attr]
    return command
