"""`command`: run a shell command, made idempotent with creates / removes / unless."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from gpunode.connection import q
from gpunode.facts import Facts
from gpunode.steps.base import Action, Step, StepContext, arg, register
from gpunode.steps.probe import Snippets


@register
@dataclass
class CommandStep(Step):
    """Run `cmd` (as root, through sh) unless `creates` exists, `removes` is missing, or `unless` succeeds."""

    kind = "command"
    needs_root = False  # the user's own files and commands may need no root
    facts_sections = frozenset()
    cmd: str = arg(doc="shell text run by sh as root: quote template values with `| quote`")
    creates: str | None = arg(None, "a path: skip when it exists")
    removes: str | None = arg(None, "a path: skip when it is missing")
    unless: str | None = arg(None, "shell text: skip when it succeeds")
    chdir: str | None = arg(None, "the folder to run in")
    timeout: int = arg(3600, "seconds")

    def probe(self, facts: Facts) -> Snippets | None:
        checks = []
        if self.creates:
            checks.append(f"[ -e {q(self.creates)} ] && echo creates-exists")
        if self.removes:
            checks.append(f"[ -e {q(self.removes)} ] || echo removes-missing")
        if self.unless:
            checks.append(unless_check(self.unless))
        return {"guards": "; ".join(checks)} if checks else None

    def plan(self, ctx: StepContext) -> list[Action]:
        guarded = self.creates or self.removes or self.unless  # the probe asks for `guards` only then
        seen = set(ctx.probe["guards"].split()) if guarded else set()
        if "creates-exists" in seen or "removes-missing" in seen or "unless-ok" in seen:
            return []
        reason = "no creates/removes/unless guard" if not (self.creates or self.removes or self.unless) else (
            f"{self.creates} does not exist" if self.creates else
            f"{self.removes} exists" if self.removes else f"`{self.unless}` failed")
        # the shell text itself: the host runs it in a shell of its own (as `sh -c`; a sensitive step's arrives on
        # stdin, connection/guard.py), so no process's argv holds it
        command = f"cd {q(self.chdir)} || exit\n{self.cmd}" if self.chdir else self.cmd
        return [Action(f"run: {self.cmd}", reason, command, timeout=self.timeout)]


def unless_check(unless: str) -> str:
    """The `unless` guard as probe shell text: the command reaches its shell in a here-document and runs by `eval`
    in a subshell, so it is on no process's command line (`ps`) even while it runs. The delimiter is derived from the
    text (the same text makes the same probe: the probe guessed from the last run's facts still matches)."""
    delimiter = "GPUNODE_UNLESS_" + hashlib.sha256(unless.encode()).hexdigest()[:16]
    return (f"_gn_u=$(cat <<'{delimiter}'\n{unless}\n{delimiter}\n)\n"
            f"(eval \"$_gn_u\") </dev/null >/dev/null 2>&1 && echo unless-ok")
