"""What each built-in playbook does and which variables it takes, read from the playbook files themselves
(the header comment, `vars:` with their trailing comments, and the variables its steps use without a default)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gpunode.playbook.builtin import builtin_names, builtin_path
from gpunode.playbook.load import Playbook, StepSpec, load_playbook
from gpunode.templates_read import names_read
from gpunode.yamlfile import LineDict, load_yaml_file

RUNTIME_NAMES = {"facts", "inventory_hostname", "check_mode"}  # given by the runner, not by the user
_COMMENT = re.compile(r"\s#\s?(?P<text>.*)$")


@dataclass
class Variable:
    name: str
    default: Any
    comment: str = ""
    required: bool = False  # used by a step, with no default: the inventory or --var must set it


@dataclass
class PlaybookInfo:
    name: str
    path: str
    description: str
    variables: list[Variable] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "path": self.path, "description": self.description, "tags": self.tags,
                "variables": [{"name": v.name, "default": v.default, "comment": v.comment, "required": v.required}
                              for v in self.variables]}


def describe_builtins() -> list[PlaybookInfo]:
    """Every built-in playbook, described from its own file."""
    return [describe(builtin_path(name), name) for name in builtin_names()]


def describe(path: Path, name: str | None = None) -> PlaybookInfo:
    book = load_playbook(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    header = []
    for line in lines:
        if not line.startswith("#"):
            break
        header.append(line.lstrip("#").strip())
    raw = load_yaml_file(path)
    raw_vars = raw.get("vars") if isinstance(raw, LineDict) else None
    variables = [Variable(key, plain(value), _comment(lines, raw_vars, key)) for key, value in book.vars.items()]
    variables += [Variable(key, None, "required: set it in the inventory or with --var", required=True)
                  for key in sorted(used_variables(book) - set(book.vars) - RUNTIME_NAMES)]
    return PlaybookInfo(name or path.stem, str(path), " ".join(header), variables, book.tags)


def _comment(lines: list[str], raw_vars: Any, key: str) -> str:
    """The trailing `# ...` of the line that sets `key` under vars:."""
    if not isinstance(raw_vars, LineDict):
        return ""
    index = raw_vars.line_of(key) - 1
    match = _COMMENT.search(lines[index]) if 0 <= index < len(lines) else None
    return match.group("text").strip() if match else ""


def used_variables(book: Playbook) -> set[str]:
    """Names the steps' templates and `when:` conditions read."""
    names: set[str] = set()
    specs: list[StepSpec] = [*book.steps, *book.handlers.values()]
    for spec in specs:
        names |= names_read(spec.args, [spec.when]) - set(spec.vars)  # an included step's defaults come with it
    return names


def plain(value: Any) -> Any:
    """Line-aware YAML containers as plain dicts and lists."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def yaml_value(value: Any) -> str:
    """A default as it would be written in YAML (one line)."""
    return yaml.safe_dump(value, default_flow_style=True, width=10_000).removesuffix("\n...\n").strip()
