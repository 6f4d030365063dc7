"""`plan --image BASE --playbook P`: what a bake would do to a base image, from its pinned state, offline."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from gpunode.errors import UsageError

if TYPE_CHECKING:
    from gpunode.image.offline_plan import ImagePlan


def build_refusal(plan: ImagePlan) -> str | None:
    """Why `build-ami --base BASE` would refuse this playbook (a second NVIDIA driver on a base that ships one), or
    None: the plan of such a playbook is shown, but no bake runs it."""
    from gpunode.clouds.aws import DRIVER_BASES

    if plan.base not in DRIVER_BASES or not any(step.kind == "nvidia_driver" for step in plan.steps):
        return None
    return (f"`gpunode build-ami --base {plan.base}` refuses playbook {plan.playbook}: the image carries AWS's NVIDIA "
            "driver and this playbook installs another (an nvidia_driver step); a bake there runs `base` (the "
            "default), or a playbook without that step")


def plan_text(image: str | None, playbook: str, as_json: bool, variables: list[str]) -> str:
    """The plan as text (one line per action, with its reason) or JSON."""
    from gpunode.app.variables import parse_vars
    from gpunode.image.image_state import bases
    from gpunode.image.offline_plan import plan_image

    if not image:
        raise UsageError("--image is required", fix=f"name a base: --image {' | '.join(bases())}")
    plan = plan_image(image, playbook, parse_vars(variables))
    refused = build_refusal(plan)
    if as_json:
        return json.dumps({**plan.as_dict(), "build_ami_refuses": refused}, indent=2) + "\n"
    lines = [f"plan of {plan.playbook} on the pinned state of {plan.base} (offline: no host contacted; "
             "'?': planned on what the pinned state does not say, read as empty)"]
    if refused:
        lines.append(f"  note: {refused}")
    for step in plan.steps:
        if step.skipped:
            lines.append(f"  - {step.name}: skipped (when: false)")
        elif step.error:
            lines.append(f"  ! {step.name}: refused: {step.error['message']} (fix: {step.error['fix']})")
        elif not step.actions:
            lines.append(f"  {'?' if step.unanswered else '='} {step.name}: nothing to do")
        mark = "?" if step.unanswered else "+"  # planned on probe output the pinned state does not give
        for action in step.actions:
            lines.append(f"  {mark} {step.name}: {action['summary']}\n      because {action['reason']}")
            if action["command"]:
                lines.append(f"      $ {action['command']}")
        lines += [f"      note: {note}" for note in step.notes]
        lines += [f"      not in the pinned state: {cmd.splitlines()[0][:100]}" for cmd in step.unanswered]
    return "\n".join(lines) + "\n"
