"""The step classes by kind: `register`, the lookup that imports a kind's module on first use, `build_step`.

A step kind is declared once: the `kind` class attribute of its class, in its module under gpunode/steps/ (found by
reading the source: steps/registry.py). Its module is imported when a playbook first uses it.
"""

from __future__ import annotations

import dataclasses
import importlib
import typing
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from gpunode.facts.sections import OPTIONAL as OPTIONAL_SECTIONS
from gpunode.steps.arguments import coerce
from gpunode.steps.model import ArgumentError, Step
from gpunode.steps.registry import StepDeclarationError, declared


class StepTypes(Mapping[str, "type[Step]"]):
    """kind -> step class; a kind's module is imported on first lookup (iterating imports them all)."""

    def __init__(self) -> None:
        self._classes: dict[str, type[Step]] = {}

    def register(self, cls: type[Step]) -> None:
        if dataclasses.is_dataclass(cls) and "kind" in {f.name for f in dataclasses.fields(cls)}:
            raise StepDeclarationError(
                f"{cls.__module__}.{cls.__qualname__}: `kind` is annotated as a dataclass field, so it would be a "
                "step argument", fix=f'write `kind = "{cls.kind}"` (or `kind: ClassVar[str] = "{cls.kind}"`)')
        if not isinstance(cls.kind, str) or not cls.kind:
            raise StepDeclarationError(f"{cls.__module__}.{cls.__qualname__} has no `kind`",
                                       fix='give the class `kind = "my_step"`')
        if not dataclasses.is_dataclass(cls):
            raise StepDeclarationError(f"{cls.__module__}.{cls.__qualname__} is not a dataclass (its fields are the "
                                       "step's arguments)", fix="put @dataclass under @register")
        builtin = declared().get(cls.kind)
        if builtin and builtin.module != cls.__module__:
            raise StepDeclarationError(f"step kind {cls.kind!r} is a built-in step ({builtin.where}); "
                                       f"{cls.__module__}.{cls.__qualname__} cannot take it",
                                       fix="give the class another `kind`")
        first = self._classes.get(cls.kind)
        if first and (first.__module__, first.__qualname__) != (cls.__module__, cls.__qualname__):
            raise StepDeclarationError(f"step kind {cls.kind!r} is registered twice: {first.__module__}."
                                       f"{first.__qualname__} and {cls.__module__}.{cls.__qualname__}",
                                       fix="give one of the two step classes another `kind`")
        self._classes[cls.kind] = cls

    def registered(self, kind: str) -> type[Step] | None:
        """The class registered under `kind` so far (no import); None when none is."""
        return self._classes.get(kind)

    def __getitem__(self, kind: str) -> type[Step]:
        declaration = declared().get(kind)
        if kind not in self._classes and declaration:
            importlib.import_module(declaration.module)
            if kind not in self._classes:
                raise StepDeclarationError(
                    f"{declaration.where} declares step kind {kind!r} but its class is not registered",
                    fix="decorate the step class with @register (from gpunode.steps.base)")
        return self._classes[kind]

    def __contains__(self, kind: object) -> bool:
        return kind in declared() or kind in self._classes

    def __iter__(self) -> Iterator[str]:
        return iter({**dict.fromkeys(declared()), **dict.fromkeys(self._classes)})

    def __len__(self) -> int:
        return len(set(declared()) | set(self._classes))


STEP_TYPES = StepTypes()


def register(cls: type[Step]) -> type[Step]:
    """Class decorator: make the step available to playbooks under `cls.kind`."""
    STEP_TYPES.register(cls)
    return cls


def step_facts_sections(kinds: Iterable[str]) -> frozenset[str]:
    """The facts sections the steps of these kinds read (unknown kinds: all)."""
    wanted: set[str] = set()
    for kind in kinds:
        cls = STEP_TYPES.get(kind)
        wanted |= cls.facts_sections if cls else frozenset(OPTIONAL_SECTIONS)
    return frozenset(wanted)


_HINTS: dict[type[Step], dict[str, Any]] = {}  # hints per class, read once (not functools.cache: mypy wants Hashable)


def _type_hints(cls: type[Step]) -> dict[str, Any]:
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls)
    return hints


def argument_fix(kind: str) -> str:
    """What to tell a user whose arguments a step refused (build_step raised ArgumentError / ValueError)."""
    return f"see `gpunode steps --show {kind}` (docs/steps.md)"


def build_step(kind: str, args: dict[str, Any]) -> Step:
    """Validate arguments against the step's dataclass fields and build it; raises ValueError with the reason."""
    cls = STEP_TYPES[kind]
    hints = _type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    for name in args:
        if name not in fields:
            raise ArgumentError(f"unknown argument {name!r} for {kind}; known: {', '.join(fields)}", name)
    missing = [n for n, f in fields.items() if n not in args and f.default is dataclasses.MISSING
               and f.default_factory is dataclasses.MISSING]
    if missing:
        raise ArgumentError(f"{kind} needs argument(s): {', '.join(missing)}")
    values = {}
    for name, value in args.items():
        try:
            values[name] = coerce(value, hints[name], f"{kind}.{name}")
        except ValueError as exc:
            raise ArgumentError(str(exc), name) from None
    return cls(**values)  # __post_init__ checks what types cannot
