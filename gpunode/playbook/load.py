"""Load and validate a playbook before anything runs: unknown steps and bad arguments are file:line errors."""

from __future__ import annotations

import dataclasses
import hashlib
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpunode.errors import UsageError
from gpunode.playbook.template import has_template
from gpunode.steps import STEP_TYPES
from gpunode.steps.base import build_step, coerce
from gpunode.yamlfile import LineDict, LineList, load_yaml_file

STEP_KEYWORDS = {"name", "when", "notify", "tags", "sensitive", "no_log"}
PLAY_KEYS = {"name", "description", "hosts", "vars", "steps", "handlers"}


@dataclass
class StepSpec:
    """A step as written in the playbook (arguments may still hold templates)."""

    kind: str
    args: dict[str, Any]
    name: str
    when: str | None
    notify: list[str]
    source: str
    line: int
    sensitive: bool = False  # `sensitive: true` (Ansible: `no_log`): content, diff and output never shown

    @property
    def where(self) -> str:
        return f"{self.source}:{self.line}"


@dataclass
class Playbook:
    """A validated playbook."""

    path: str
    name: str
    hosts: str | None
    vars: dict[str, Any]
    steps: list[StepSpec]
    handlers: dict[str, StepSpec] = field(default_factory=dict)
    sha256: str = ""


def load_playbook(path: str | Path) -> Playbook:
    """Parse and validate; raises UsageError naming file:line for any problem."""
    source = str(path)
    data = load_yaml_file(path)
    if isinstance(data, LineList) and len(data) == 1 and isinstance(data[0], dict):
        data = data[0]  # an Ansible-style one-play list
    if not isinstance(data, LineDict):
        raise UsageError("a playbook must be a mapping with `steps:`", source=source, line=1,
                         fix="see playbooks/base.yml for the shape")
    for key in data:
        if key not in PLAY_KEYS:
            raise UsageError(f"unknown playbook key {key!r}", source=source, line=data.line_of(key),
                             fix=f"use one of: {', '.join(sorted(PLAY_KEYS))}")
    variables = data.get("vars") or {}
    if not isinstance(variables, dict):
        raise UsageError("`vars` must be a mapping", source=source, line=data.line_of("vars"))
    steps_data = data.get("steps")
    if not isinstance(steps_data, list) or not steps_data:
        raise UsageError("`steps` must be a non-empty list", source=source, line=data.line_of("steps"),
                         fix="add steps, e.g. `- packages: {names: [curl]}`")
    steps = [_step(item, source, _item_line(steps_data, i, data.line_of("steps"))) for i, item in enumerate(steps_data)]
    handlers: dict[str, StepSpec] = {}
    for i, item in enumerate(data.get("handlers") or []):
        handler = _step(item, source, _item_line(data["handlers"], i, data.line_of("handlers")))
        handlers[handler.name] = handler
    for step in steps:
        for target in step.notify:
            if target not in handlers:
                raise UsageError(f"notify: no handler named {target!r}", source=source, line=step.line,
                                 fix=f"define it under handlers: (known: {', '.join(handlers) or 'none'})")
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    return Playbook(source, str(data.get("name") or Path(path).stem), data.get("hosts"), dict(variables),
                    steps, handlers, digest)


def _item_line(items: Any, index: int, default: int) -> int:
    return items.item_lines[index] if isinstance(items, LineList) else default


def _step(item: Any, source: str, line: int) -> StepSpec:
    if not isinstance(item, dict):
        raise UsageError("each step must be a mapping like `- packages: {...}`", source=source, line=line)
    kinds = [k for k in item if k not in STEP_KEYWORDS]
    unknown = [k for k in kinds if k not in STEP_TYPES]
    if unknown:
        raise UsageError(f"unknown step {unknown[0]!r}", source=source, line=_line(item, unknown[0], line),
                         fix=f"known steps: {', '.join(sorted(STEP_TYPES))}")
    if len(kinds) != 1:
        raise UsageError(f"a step needs exactly one step type, found {len(kinds)}: {', '.join(kinds) or 'none'}",
                         source=source, line=line, fix=f"known steps: {', '.join(sorted(STEP_TYPES))}")
    kind = kinds[0]
    args = item[kind] if item[kind] is not None else {}
    if not isinstance(args, dict):
        raise UsageError(f"arguments of {kind} must be a mapping", source=source, line=_line(item, kind, line))
    notify = item.get("notify") or []
    notify = [notify] if isinstance(notify, str) else list(notify)
    sensitive = item.get("sensitive", item.get("no_log", False))
    if not isinstance(sensitive, bool):
        raise UsageError(f"sensitive must be true or false, got {sensitive!r}", source=source, line=line,
                         fix="write sensitive: true")
    spec = StepSpec(kind, dict(args), str(item.get("name") or kind), item.get("when"), notify, source,
                    _line(item, kind, line), sensitive)
    check_static_args(spec, args)
    return spec


def _line(mapping: Any, key: str, default: int) -> int:
    return mapping.line_of(key) if isinstance(mapping, LineDict) else default


def check_static_args(spec: StepSpec, args: dict[str, Any]) -> None:
    """Validate every argument that holds no template; templated ones are checked per host after rendering."""
    if has_template(args):
        cls = STEP_TYPES[spec.kind]
        hints = typing.get_type_hints(cls)
        names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        for key, value in args.items():
            where = _line(args, key, spec.line)
            if key not in names:
                raise UsageError(f"unknown argument {key!r} for {spec.kind}", source=spec.source, line=where,
                                 fix=f"known arguments: {', '.join(sorted(names))}")
            if not has_template(value):
                try:
                    coerce(value, hints[key], f"{spec.kind}.{key}")
                except ValueError as exc:
                    raise UsageError(str(exc), source=spec.source, line=where) from None
        return
    try:
        build_step(spec.kind, args)
    except ValueError as exc:
        bad = getattr(exc, "arg", None)
        raise UsageError(str(exc), source=spec.source, line=_line(args, bad, spec.line) if bad else spec.line,
                         fix=f"see the `{spec.kind}` step in README") from None
