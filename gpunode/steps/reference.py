"""A step kind's reference, read from its class: the doc, each argument's type, default and doc (docs/steps.md and
`gpunode steps --show KIND` print the same)."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from typing import Any, Literal

from gpunode.markdown import cell, code, prose, table, yaml_value
from gpunode.steps.arguments import Mode


def type_name(hint: Any) -> str:
    """A step argument's type in a playbook's words: `str`, `list of str`, `one of a, b`, `int or none`."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Mode:
        return "mode"
    if origin is Literal:
        return "one of " + ", ".join(map(str, args))
    if origin is list:
        return f"list of {type_name(args[0])}" if args else "list"
    if origin is dict:
        return "mapping"
    if args and type(None) in args:
        return " or ".join([*(type_name(a) for a in args if a is not type(None)), "none"])
    if args:
        return " or ".join(type_name(a) for a in args)
    return getattr(hint, "__name__", str(hint))


def default_of(f: dataclasses.Field) -> str:
    if f.default is not dataclasses.MISSING:
        return code(yaml_value(f.default))
    if f.default_factory is not dataclasses.MISSING:
        return code(yaml_value(f.default_factory()))
    return "**required**"


def step_section(kind: str) -> list[str]:
    """One step kind's reference (the section of docs/steps.md; `gpunode steps --show KIND` prints it)."""
    from gpunode.steps.arguments import arg_doc
    from gpunode.steps.kinds import STEP_TYPES
    from gpunode.steps.registry import declared

    cls = STEP_TYPES[kind]
    hints = typing.get_type_hints(cls)
    out = [f"## {kind}", "", f"`{declared()[kind].where.rsplit(':', 1)[0]}`", "",
           prose(inspect.cleandoc(cls.__doc__ or "")), ""]
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    if not fields:
        return [*out, "No arguments."]
    return out + table(["argument", "type", "default", "what it is"],
                       [[f"`{f.name}`", cell(type_name(hints[f.name])), default_of(f), cell(arg_doc(f))]
                        for f in fields])


def steps_index() -> str:
    """Every step kind with the first line of its doc (`gpunode steps`)."""
    from gpunode.steps.kinds import STEP_TYPES
    from gpunode.steps.registry import declared

    return "".join(f"{k:26} {first_line(STEP_TYPES[k].__doc__)}\n" for k in sorted(declared()))


def first_line(doc: str | None) -> str:
    return inspect.cleandoc(doc or "").split("\n\n")[0].replace("\n", " ")
