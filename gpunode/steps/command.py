"""`command`: run a shell command, made idempotent with creates / removes / unless."""

from __future__ import annotations

from dataclasses import dataclass

from gpunode.connection import q
from gpunode.facts import Facts
from gpunode.steps.base import Action, Step, StepContext, register
from gpunode.steps.probe import Snippets


@register
@dataclass
class CommandStep(Step):
    """Run `cmd` (as root, through sh) unless `creates` exists, `removes` is missing, or `unless` succeeds."""

    kind = "command"
    needs_root = False  # the user's own files and commands may need no root
    facts_sections = frozenset()
    cmd: str
    creates: str | None = None
    removes: str | None = None
    unless: str | None = None
    chdir: str | None = None
    timeout: int = 3600

    def probe(self, facts: Facts) -> Snippets | None:
        checks = []
        if self.creates:
            checks.append(f"[ -e {q(self.creates)} ] && echo creates-exists")
        if self.removes:
            checks.append(f"[ -e {q(self.removes)} ] || echo removes-missing")
        if self.unless:
            checks.append(f"(sh -c {q(self.unless)}) >/dev/null 2>&1 && echo unless-ok")
        return {"guards": "; ".join(checks)} if checks else None

    def plan(self, ctx: StepContext) -> list[Action]:
        seen = set(ctx.probe["guards"].split())
        if "creates-exists" in seen or "removes-missing" in seen or "unless-ok" in seen:
            return []
        reason = "no creates/removes/unless guard" if not (self.creates or self.removes or self.unless) else (
            f"{self.creates} does not exist" if self.creates else
            f"{self.removes} exists" if self.removes else f"`{self.unless}` failed")
        command = f"cd {q(self.chdir)} && {self.cmd}" if self.chdir else self.cmd
        return [Action(f"run: {self.cmd}", reason, f"sh -c {q(command)}", timeout=self.timeout)]
