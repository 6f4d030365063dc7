"""Generic file steps: `file` (whole content / mode / absent) and `line` (one managed line)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from gpunode.connection import q
from gpunode.facts import Facts
from gpunode.steps.base import Action, Mode, Step, StepContext, StepFailed, arg, register
from gpunode.steps.probe import Snippets
from gpunode.steps.remote_file import FileState, parse_file_probe, probe_file, write_action
from gpunode.values import file_mode


@register
@dataclass
class FileStep(Step):
    """Ensure a file has this content (and mode/owner), or is absent."""

    kind = "file"
    needs_root = False  # the user's own files and commands may need no root
    facts_sections = frozenset()
    path: str = arg(doc="the file (absolute)")
    content: str | None = arg(None, "the whole file's content")
    mode: Mode | None = arg(None, "permissions, quoted: '0644'")
    owner: str | None = arg(None, "the owning user")
    group: str | None = arg(None, "the owning group")
    state: Literal["present", "absent"] = arg("present", "absent: remove the file")
    backup: bool = arg(True, "keep a timestamped backup of the old file")
    validate: str | None = arg(None, "a command that gets the new file as $1; the file is written only if it "
                                        "succeeds")

    def __post_init__(self) -> None:
        if not self.path.startswith("/"):
            raise ValueError(f"file.path must be absolute, got {self.path!r}")
        if self.mode is not None:
            self.mode = Mode(file_mode(self.mode, "file.mode"))

    def probe(self, facts: Facts) -> Snippets:
        return {"file": probe_file(self.path), **who_probe(self.owner, self.group)}

    def plan(self, ctx: StepContext) -> list[Action]:
        state = parse_file_probe(ctx.probe["file"])
        check_who(ctx, self.path, self.owner, self.group)
        if self.state == "absent":
            return self._plan_absent(state)
        mode = self.mode or ""
        if self.content is not None and (not state.exists or state.content != self.content):
            return [write_action(self.path, state, self.content, mode=mode, owner=self.owner or "",
                                 group=self.group or "", backup=self.backup, validate=self.validate or "")]
        if not state.exists:
            return [write_action(self.path, state, "", mode=mode, owner=self.owner or "", group=self.group or "")]
        return self._attribute_actions(state, mode)

    def _plan_absent(self, state: FileState) -> list[Action]:
        """Remove the file when it exists."""
        if not state.exists:
            return []
        return [Action(f"remove {self.path}", "file exists", f"rm -f -- {q(self.path)}",
                       diff=f"--- {self.path}\n+++ /dev/null\n", writes=self.path)]

    def _attribute_actions(self, state: FileState, mode: str) -> list[Action]:
        """chmod and chown of a file whose content is already right."""
        actions = []
        if mode and state.mode != mode:
            actions.append(Action(f"chmod {mode} {self.path}", f"mode is {state.mode}",
                                  f"chmod {q(mode)} -- {q(self.path)}", writes=self.path))
        if (self.owner and state.owner != self.owner) or (self.group and state.group != self.group):
            who = f"{self.owner or state.owner}:{self.group or state.group}"
            actions.append(Action(f"chown {who} {self.path}", f"owned by {state.owner}:{state.group}",
                                  f"chown {q(who)} -- {q(self.path)}", writes=self.path))
        return actions


def who_probe(owner: str | None, group: str | None) -> Snippets:
    """Whether the owner and group exist on the host (passwd/group, NSS included), read with the batched probe."""
    checks = [f"getent passwd {q(owner)} >/dev/null || echo no-owner" if owner else "",
              f"getent group {q(group)} >/dev/null || echo no-group" if group else ""]
    return {"who": "; ".join(c for c in checks if c)} if owner or group else {}


def check_who(ctx: StepContext, path: str, owner: str | None, group: str | None) -> None:
    """An owner or group that the host does not know fails the plan (check mode too), not the chown at apply."""
    missing = ctx.probe["who"].split() if owner or group else []  # asked only then (who_probe)
    for word, kind, name, listing in (("no-owner", "user", owner, "getent passwd"),
                                      ("no-group", "group", group, "getent group")):
        if word in missing:
            raise StepFailed(f"{path}: the {kind} {name!r} does not exist on the host",
                             fix=f"create it first (a step before this one), or give an existing {kind} "
                             f"(`{listing}` on the host lists them)")


@register
@dataclass
class LineStep(Step):
    """Ensure one line is present (replacing the line that matches `regexp`) or absent."""

    kind = "line"
    needs_root = False  # the user's own files and commands may need no root
    facts_sections = frozenset()
    path: str = arg(doc="the file (absolute)")
    line: str | None = arg(None, "the line wanted")
    regexp: str | None = arg(None, "the line to replace (state present) or to remove (absent)")
    state: Literal["present", "absent"] = arg("present", "absent: remove the lines that match")
    create: bool = arg(False, "create a missing file (as Ansible's lineinfile: off, so a mistyped path fails)")
    backup: bool = arg(True, "keep a timestamped backup of the old file")
    mode: Mode | None = arg(None, "permissions, quoted: '0644'")

    def __post_init__(self) -> None:
        if not self.path.startswith("/"):
            raise ValueError(f"line.path must be absolute, got {self.path!r}")
        if self.state == "present" and self.line is None:
            raise ValueError("line.line is required when state is present")
        if "\n" in (self.line or ""):
            raise ValueError("line.line must be a single line (no newline)")
        if self.mode is not None:
            self.mode = Mode(file_mode(self.mode, "line.mode"))
        if self.regexp is not None:
            try:
                re.compile(self.regexp)
            except re.error as exc:
                raise ValueError(f"line.regexp is not a valid regular expression: {exc}") from None

    def probe(self, facts: Facts) -> Snippets:
        return {"file": probe_file(self.path)}

    def edit(self, text: str) -> str:
        """The file's content after the edit (pure: tested without a host)."""
        lines = text.split("\n")  # not splitlines(): \r (CRLF files), \f or U+2028 inside a line stay as they are
        if lines[-1] == "":
            lines.pop()
        pattern = re.compile(self.regexp) if self.regexp else None
        matches = [i for i, ln in enumerate(lines) if (pattern.search(ln) if pattern else ln == self.line)]
        if self.state == "absent":
            lines = [ln for i, ln in enumerate(lines) if i not in matches]
        elif matches:
            first = matches[0]
            lines[first] = self.line or ""
            lines = [ln for i, ln in enumerate(lines) if i == first or i not in matches[1:]]
        elif self.line not in lines:
            lines.append(self.line or "")
        return "\n".join(lines) + ("\n" if lines else "")

    def plan(self, ctx: StepContext) -> list[Action]:
        state = parse_file_probe(ctx.probe["file"])
        if not state.exists and (self.state == "absent" or not self.create):
            if self.state == "absent":
                return []
            return [Action(f"{self.path} is missing", "create is false", command="false",
                           fix=f"create {self.path} first or set create: true")]
        new = self.edit(state.content)
        mode = self.mode or ""
        if state.exists and new == state.content:
            if mode and state.mode != mode:  # the line is there, the permissions are not (a secret left readable)
                return [Action(f"chmod {mode} {self.path}", f"mode is {state.mode}",
                               f"chmod {q(mode)} -- {q(self.path)}", writes=self.path)]
            return []
        return [write_action(self.path, state, new, mode=mode, backup=self.backup,
                             reason="line missing or different" if self.state == "present" else "line present")]
