"""Load and validate a playbook before anything runs: unknown steps and bad arguments are file:line errors.

A step may instead include another playbook (`- include: gpu-node` for a built-in, or a path relative to the
including file) with its own `vars`, `when` and `tags`; its steps and handlers are validated the same way.
"""

from __future__ import annotations

import dataclasses
import hashlib
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpunode.errors import UsageError
from gpunode.playbook.builtin import resolve_playbook
from gpunode.playbook.library import UserSteps, load_library, user_step_file
from gpunode.playbook.rollout import Rollout
from gpunode.playbook.template import has_template
from gpunode.playbook.validate import check_conditions, check_syntax
from gpunode.steps import STEP_TYPES
from gpunode.steps.arguments import coerce
from gpunode.steps.kinds import argument_fix, build_step
from gpunode.yamlfile import LineDict, LineList, load_yaml_file

TASK_KEYS = {"register", "ignore_errors", "failed_when", "changed_when", "check_mode"}  # Ansible's, same meaning
STEP_KEYWORDS = {"name", "when", "notify", "tags", "sensitive", "no_log", "disturbs_gpus", *TASK_KEYS}
INCLUDE_KEYS = {"include", "name", "vars", "when", "tags"}
PLAY_KEYS = {"name", "description", "hosts", "vars", "steps", "handlers", "serial", "max_fail_percentage", "canary",
             "drain", "drain_timeout", "rollback", "gate"}
ROLLOUT_FIX = {
    "serial": "serial: 1, serial: 25%, or a list such as [1, 5, 25%] (the last size repeats)",
    "max_fail_percentage": "max_fail_percentage: 0 to 100",
    "canary": "canary: 1 (the first host alone, which must pass before any other is touched)",
    "drain": "drain: auto (take a node out of its scheduler before a change that disturbs its GPUs) or never",
    "drain_timeout": "drain_timeout: 3600 (seconds to wait for the node's running jobs)",
    "rollback": "rollback: true or false",
}
# Ansible task keywords and modules gpunode has no key for: what to write instead (docs/guide.md, "Coming from Ansible")
ANSIBLE_INSTEAD = {
    "loop": "loops are not supported: give the list to the step, e.g. `packages: {names: [...]}`",
    "with_items": "loops are not supported: give the list to the step, e.g. `packages: {names: [...]}`",
    "become": "steps always run as root through become: set `ansible_become` in the inventory",
    "become_user": "steps always run as root through become: set `ansible_become` in the inventory",
    "shell": "write `command: {cmd: ...}` (its cmd is shell text, as Ansible's shell)",
    "environment": "set variables in the command itself: `cmd: FOO=bar program`",
}
# Ansible play keywords gpunode has no key for: what to write instead
ANSIBLE_PLAY_INSTEAD = {
    "tasks": "the play's list is `steps:` (same items: a step kind with its arguments, name, when, tags...)",
    "pre_tasks": "put them first under `steps:`",
    "post_tasks": "put them last under `steps:`",
    "become": ANSIBLE_INSTEAD["become"] + "; remove this key",
    "become_user": ANSIBLE_INSTEAD["become_user"] + "; remove this key",
    "remote_user": "set `ansible_user` in the inventory; remove this key",
    "gather_facts": "facts are always gathered, in the same round trip as the steps' probes; remove this key",
    "vars_files": "not supported: put the variables in the inventory's group_vars/ or host_vars/, or give "
                  "`-e @file.yml`",
    "roles": "not supported: include a playbook of steps instead (`- include: ./path.yml` under `steps:`)",
}


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
    tags: list[str] = field(default_factory=list)
    # defaults in scope for an included step (its playbook's vars, the includer's, the include's own `vars:`);
    # inventory vars and --var still override them
    vars: dict[str, Any] = field(default_factory=dict)
    sensitive: bool = False  # `sensitive: true` (Ansible: `no_log`): content, diff and output never shown
    register: str | None = None            # the variable that holds this step's result for later steps
    ignore_errors: bool = False            # a failure is reported (as ignored) and the host goes on
    failed_when: list[str] | None = None   # conditions (all must hold) that make the step failed, instead of exit codes
    changed_when: list[str] | None = None  # conditions (all must hold) that make the step changed
    check_mode: bool | None = None         # false: runs in --check too (a read-only query); true: always predicts
    disturbs_gpus: bool | None = None      # its change disturbs running GPU work (a rolling run drains first);
                                           # None: as its kind says (steps/model.py Step.disturbs_gpus)

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
    rollout: Rollout = field(default_factory=Rollout)  # `serial` and `max_fail_percentage`: hosts in batches
    library: list[UserSteps] = field(default_factory=list)  # user step files loaded (library/ beside a playbook)
    gate: list[StepSpec] = field(default_factory=list)  # `gate:` steps a changed host must pass before it returns

    @property
    def tags(self) -> list[str]:
        """Every tag used by a step, in order of first use."""
        return list(dict.fromkeys(t for s in self.steps for t in s.tags))


def load_playbook(ref: str | Path, _chain: tuple[Path, ...] = ()) -> Playbook:
    """Parse and validate; a bare name (`gpu-node`) is a built-in playbook, anything else a path.
    Raises UsageError naming file:line for any problem."""
    path = resolve_playbook(ref) if isinstance(ref, str) else Path(ref)
    source = str(path)
    data = _play(path, source)
    variables = data.get("vars") or {}
    _check_vars(variables, source, data.line_of("vars"))
    steps_data = data.get("steps")
    if not isinstance(steps_data, list) or not steps_data:
        raise UsageError("`steps` must be a non-empty list", source=source, line=data.line_of("steps"),
                         fix="add steps, e.g. `- packages: {names: [curl]}`")
    chain = (*_chain, path.resolve())
    library = load_library(path)  # before the steps: they may use its kinds
    steps, handlers, included = _steps(steps_data, data.line_of("steps"), source, variables, chain)
    _add_handlers(data, source, handlers)
    _check_notify(steps, handlers)
    library = list({u.path: u for u in [*library, *(u for b in included for u in b.library)]}.values())
    parts = "".join([*(b.sha256 for b in included), *(u.sha256 for u in library)])
    digest = hashlib.sha256(path.read_bytes() + parts.encode()).hexdigest()
    return Playbook(source, str(data.get("name") or path.stem), data.get("hosts"), dict(variables),
                    steps, handlers, digest, _rollout(data, source), library, _gate(data, source, chain))


def _gate(data: LineDict, source: str, chain: tuple[Path, ...]) -> list[StepSpec]:
    """The play's `gate:` steps (run on a host after its change, before it returns to its scheduler)."""
    gate = data.get("gate")
    if gate is None:
        return []
    if not isinstance(gate, list) or not gate:
        raise UsageError("`gate` must be a non-empty list of steps", source=source, line=data.line_of("gate"),
                         fix="e.g. `gate: [{command: {cmd: 'nvidia-smi -L'}}]`, or leave it out")
    steps, handlers, _ = _steps(gate, data.line_of("gate"), source, dict(data.get("vars") or {}), chain)
    if handlers or any(s.notify for s in steps):
        raise UsageError("a gate step cannot notify handlers", source=source, line=data.line_of("gate"),
                         fix="a gate only checks: remove `notify:` from it")
    return steps


def _rollout(data: LineDict, source: str) -> Rollout:
    """The play's `serial` and `max_fail_percentage` (Ansible's play keys) and gpunode's rolling keys, checked."""
    try:
        return Rollout.from_play(data)
    except ValueError as exc:
        key = str(exc).partition(":")[0]
        raise UsageError(str(exc), source=source, line=data.line_of(key), fix=ROLLOUT_FIX.get(key, "")) from None


def _play(path: Path, source: str) -> LineDict:
    """The file's play: a mapping (or an Ansible-style one-play list) with only the known play keys."""
    data = load_yaml_file(path)
    if isinstance(data, LineList) and len(data) == 1 and isinstance(data[0], dict):
        data = data[0]  # an Ansible-style one-play list
    if not isinstance(data, LineDict):
        raise UsageError("a playbook must be a mapping with `steps:`", source=source, line=1,
                         fix="see `gpunode playbooks --show base` for the shape")
    for key in data:
        if key in ANSIBLE_PLAY_INSTEAD:
            raise UsageError(f"Ansible's play key {key!r} is not a gpunode playbook key", source=source,
                             line=data.line_of(key), fix=ANSIBLE_PLAY_INSTEAD[key])
        if key not in PLAY_KEYS:
            raise UsageError(f"unknown playbook key {key!r}", source=source, line=data.line_of(key),
                             fix=f"use one of: {', '.join(sorted(PLAY_KEYS))}")
    return data


def _steps(steps_data: list, steps_line: int, source: str, variables: dict[str, Any], chain: tuple[Path, ...],
           ) -> tuple[list[StepSpec], dict[str, StepSpec], list[Playbook]]:
    """The play's steps with each include expanded in place, the included playbooks' handlers, and those
    playbooks (their digests make the play's)."""
    steps: list[StepSpec] = []
    handlers: dict[str, StepSpec] = {}
    included: list[Playbook] = []
    for i, item in enumerate(steps_data):
        line = _item_line(steps_data, i, steps_line)
        if isinstance(item, dict) and "include" in item:
            book = _include(item, source, line, chain)
            steps += _scoped(book, item, dict(variables))
            _merge_handlers(handlers, _scoped_handlers(book, dict(variables), item), source, line)
            included.append(book)
        else:
            steps.append(_step(item, source, line))
    return steps, handlers, included


def _add_handlers(data: LineDict, source: str, handlers: dict[str, StepSpec]) -> None:
    """The play's own `handlers:` into `handlers` (untagged: a handler runs when notified)."""
    for i, item in enumerate(data.get("handlers") or []):
        handler = _step(item, source, _item_line(data["handlers"], i, data.line_of("handlers")))
        if handler.tags:
            raise UsageError("`tags` on a handler have no effect (a handler runs when a step notifies it)",
                             source=source, line=handler.line, fix="tag the step that notifies it")
        _merge_handlers(handlers, {handler.name: handler}, source, handler.line)


def _check_notify(steps: list[StepSpec], handlers: dict[str, StepSpec]) -> None:
    """Every `notify:` names a handler."""
    for step in steps:
        for target in step.notify:
            if target not in handlers:
                raise UsageError(f"notify: no handler named {target!r}", source=step.source, line=step.line,
                                 fix=f"define it under handlers: (known: {', '.join(handlers) or 'none'})")


def _check_vars(variables: Any, source: str, line: int) -> None:
    """The play's `vars:` is a mapping whose templates parse."""
    if not isinstance(variables, dict):
        raise UsageError("`vars` must be a mapping", source=source, line=line)
    for key, value in variables.items():
        check_syntax(value, source, _line(variables, key, line), f"vars: {key}")


def _include(item: dict, source: str, line: int, chain: tuple[Path, ...]) -> Playbook:
    """Validate an `include:` item and load the playbook it names (relative paths: from the including file)."""
    for key in item:
        if key not in INCLUDE_KEYS:
            raise UsageError(f"unknown key {key!r} in an include", source=source, line=_line(item, key, line),
                             fix=f"an include takes: {', '.join(sorted(INCLUDE_KEYS))} (steps go in the included "
                             "playbook or in their own list item)")
    ref = item["include"]
    where = _line(item, "include", line)
    if not isinstance(ref, str) or not ref.strip():
        raise UsageError("`include` needs a built-in playbook name or a path", source=source, line=where,
                         fix="e.g. `- include: gpu-node` or `- include: ./my-steps.yml`")
    if not isinstance(item.get("vars") or {}, dict):
        raise UsageError("`vars` of an include must be a mapping", source=source, line=_line(item, "vars", line))
    check_syntax(item.get("vars") or {}, source, _line(item, "vars", line), "vars")
    if item.get("when") is not None:
        check_conditions([str(item["when"])], source, _line(item, "when", line), "when")
    _tags(item, source, line)
    try:
        target = resolve_playbook(ref, base=Path(source).parent)
    except UsageError as exc:
        raise UsageError(f"include {ref!r}: {exc.cause.split(': ', 1)[-1]}", source=source, line=where,
                         fix=exc.fix) from None
    if not target.is_file():
        raise UsageError(f"include {ref!r}: no such file ({target})", source=source, line=where,
                         fix="a path is relative to the including playbook; a built-in is a bare name "
                         "(`gpunode playbooks` lists them)")
    if target.resolve() in chain:
        loop = " -> ".join(str(p) for p in (*chain[chain.index(target.resolve()):], target.resolve()))
        raise UsageError(f"include loop: {loop}", source=source, line=where, fix="remove one of the includes")
    return load_playbook(target, chain)


def _scoped(book: Playbook, item: dict, outer_vars: dict[str, Any]) -> list[StepSpec]:
    """The included steps with the include's `when`, `tags` and variable defaults applied."""
    return [_scope(spec, book, item, outer_vars) for spec in book.steps]


def _scoped_handlers(book: Playbook, outer_vars: dict[str, Any], item: dict) -> dict[str, StepSpec]:
    return {name: _scope(spec, book, {"vars": item.get("vars")}, outer_vars) for name, spec in book.handlers.items()}


def _scope(spec: StepSpec, book: Playbook, item: dict, outer_vars: dict[str, Any]) -> StepSpec:
    when = item.get("when")
    if when is not None and spec.when is not None:
        when = f"({when}) and ({spec.when})"
    return dataclasses.replace(
        spec, when=spec.when if when is None else str(when),
        tags=list(dict.fromkeys([*_as_list(item.get("tags")), *spec.tags])),
        vars={**book.vars, **spec.vars, **outer_vars, **dict(item.get("vars") or {})},
    )


def _merge_handlers(handlers: dict[str, StepSpec], new: dict[str, StepSpec], source: str, line: int) -> None:
    """Handlers of included playbooks join the includer's; one name may not mean two different things."""
    for name, spec in new.items():
        known = handlers.get(name)
        if known and (known.kind, known.args) != (spec.kind, spec.args):
            raise UsageError(f"handler {name!r} of {spec.where} differs from the one at {known.where}",
                             source=source, line=line, fix="give one of them another name")
        handlers.setdefault(name, spec)


def _tags(item: dict, source: str, line: int) -> list[str]:
    """`tags:` as a list of names (a string or a list of strings); anything else is an error."""
    value = item.get("tags")
    if value is None:
        return []
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not all(isinstance(n, str) and n.strip() and "," not in n for n in names):
        raise UsageError("`tags` must be a name or a list of names", source=source, line=_line(item, "tags", line),
                         fix="e.g. `tags: [driver]`; select tagged steps with --tags driver (or --skip-tags)")
    return [n.strip() for n in names]


def _as_list(value: Any) -> list[str]:
    return [] if value is None else [value] if isinstance(value, str) else list(value)


def _item_line(items: Any, index: int, default: int) -> int:
    return items.item_lines[index] if isinstance(items, LineList) else default


def _unknown_key(key: str, has_kind: bool, source: str, line: int) -> UsageError:
    """An unknown key on a step: a misspelt step keyword (`regster`), an Ansible keyword gpunode has no key for
    (`loop`, `become`), or an unknown step type; the message says which, and what to write instead."""
    import difflib

    steps = f"known steps: {', '.join(sorted(STEP_TYPES))}"
    keywords = f"step keys: {', '.join(sorted(STEP_KEYWORDS))}"
    if key in ANSIBLE_INSTEAD:
        return UsageError(f"Ansible's {key!r} is not a gpunode step key", source=source, line=line,
                          fix=ANSIBLE_INSTEAD[key])
    close = difflib.get_close_matches(key, [*STEP_KEYWORDS, *STEP_TYPES], n=1, cutoff=0.75)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    if has_kind or (close and close[0] in STEP_KEYWORDS):
        return UsageError(f"unknown step key {key!r}{hint}", source=source, line=line, fix=f"{keywords}; {steps}")
    return UsageError(f"unknown step {key!r}{hint}", source=source, line=line, fix=steps)


def _step(item: Any, source: str, line: int) -> StepSpec:
    if not isinstance(item, dict):
        raise UsageError("each step must be a mapping like `- packages: {...}`", source=source, line=line)
    kinds = [k for k in item if k not in STEP_KEYWORDS]
    unknown = [k for k in kinds if k not in STEP_TYPES]
    if unknown:
        raise _unknown_key(unknown[0], has_kind=any(k in STEP_TYPES for k in kinds), source=source,
                           line=_line(item, unknown[0], line))
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
                    _line(item, kind, line), _tags(item, source, line), sensitive=sensitive,
                    **_task_keys(item, source, line))
    check_static_args(spec, args)
    _check_templates(spec, item, args)
    return spec


def _check_templates(spec: StepSpec, item: dict, args: dict) -> None:
    """The Jinja syntax of the step's templates and conditions, before any host is contacted."""
    for key, value in args.items():
        check_syntax(value, spec.source, _line(args, key, spec.line), f"{spec.kind}.{key}")
    conditions = {"when": [] if spec.when is None else [str(spec.when)], "failed_when": spec.failed_when or [],
                  "changed_when": spec.changed_when or []}
    for key, texts in conditions.items():
        check_conditions(texts, spec.source, _line(item, key, spec.line), key)


def _task_keys(item: dict, source: str, line: int) -> dict[str, Any]:
    """Ansible's `register`, `ignore_errors`, `failed_when` and `changed_when`, checked; conditions as a list (a bare
    true/false becomes the Jinja literal)."""
    keys: dict[str, Any] = {}
    register = item.get("register")
    if register is not None:
        if not isinstance(register, str) or not register.isidentifier() or register in RESERVED_NAMES:
            raise UsageError(f"register: {register!r} is not a variable name", source=source,
                             line=_line(item, "register", line), fix="e.g. `register: result` (letters, digits, _)")
        keys["register"] = register
    for key in ("ignore_errors", "check_mode", "disturbs_gpus"):
        flag = item.get(key)
        if flag is not None and not isinstance(flag, bool):
            raise UsageError(f"{key} must be true or false, got {flag!r}", source=source,
                             line=_line(item, key, line), fix=f"write {key}: true or {key}: false")
    keys["ignore_errors"] = bool(item.get("ignore_errors", False))
    keys["check_mode"] = item.get("check_mode")
    keys["disturbs_gpus"] = item.get("disturbs_gpus")
    for key in ("failed_when", "changed_when"):
        if item.get(key) is not None:
            keys[key] = _conditions(item[key], key, source, _line(item, key, line))
    return keys


RESERVED_NAMES = {"facts", "inventory_hostname", "check_mode", "lookup"}


def _conditions(value: Any, key: str, source: str, line: int) -> list[str]:
    items = value if isinstance(value, list) else [value]
    conditions = []
    for cond in items:
        if isinstance(cond, bool):
            conditions.append(str(cond))  # `changed_when: false`: Jinja's False
        elif isinstance(cond, str) and cond.strip():
            conditions.append(cond)
        else:
            raise UsageError(f"{key} must be a condition or a list of conditions, got {cond!r}", source=source,
                             line=line, fix=f"e.g. `{key}: result.rc != 0` or `{key}: false`")
    return conditions


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
                         fix=_argument_fix(spec.kind)) from None


def _argument_fix(kind: str) -> str:
    """Where a step's arguments are documented: `gpunode steps --show` for a built-in, the file for a user step."""
    user = user_step_file(kind)
    return f"see the step's class (its fields are its arguments) in {user}" if user else argument_fix(kind)
