"""Step arguments: declaring them (`arg`, with their docs) and checking a value against its type hint (`coerce`)."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from dataclasses import field
from typing import Any, Literal

from gpunode.values import as_bool, file_mode, kind_of


class Mode(str):
    """A step argument holding a permission mode: normalised to octal digits by `coerce` (see values.file_mode)."""


def arg(default: Any = dataclasses.MISSING, doc: str = "", *, factory: Callable[[], Any] | None = None) -> Any:
    """A step argument with its doc (docs/steps.md is generated from it): `timeout: int = arg(600, "seconds")`;
    without a default the argument is required; `factory` for a mutable default (`arg(factory=list, doc=...)`)."""
    metadata = {"doc": doc}
    if factory is not None:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)


def arg_doc(f: dataclasses.Field) -> str:
    """The doc an argument was declared with (`arg(..., doc)`); "" when none."""
    return str(f.metadata.get("doc", ""))


def coerce(value: Any, hint: Any, where: str) -> Any:
    """Check (and gently coerce: "5" -> 5, a string -> [string]) a value against a type hint."""
    if hint is Any:
        return value
    check = _BY_ORIGIN.get(typing.get_origin(hint)) or _BY_TYPE.get(hint)
    return check(value, hint, where) if check else value  # another type: taken as it is


def _coerce_union(value: Any, hint: Any, where: str) -> Any:
    options = typing.get_args(hint)
    if value is None and type(None) in options:
        return None
    errors = []
    for option in options:
        if option is type(None):
            continue
        try:
            return coerce(value, option, where)
        except ValueError as exc:
            errors.append(str(exc))
    raise ValueError(errors[0] if errors else f"{where}: bad value {value!r}")


def _coerce_literal(value: Any, hint: Any, where: str) -> Any:
    allowed = typing.get_args(hint)
    if isinstance(value, bool) and ("yes" if value else "no") in allowed:
        return "yes" if value else "no"  # YAML reads an unquoted `containerd: yes` as true
    if value not in allowed:
        raise ValueError(f"{where} must be one of {', '.join(map(str, allowed))}, got {value!r}")
    return value


def _coerce_list(value: Any, hint: Any, where: str) -> Any:
    (item,) = typing.get_args(hint) or (Any,)
    if isinstance(value, str):
        value = [value]  # one name: a list of one (a bare number is a typo: `names: 5`)
    if not isinstance(value, list | tuple):
        shown = f" {value!r}" if isinstance(value, int | float) else ""
        raise ValueError(f"{where} must be a list, got a {kind_of(value)}{shown}")
    return [coerce(v, item, f"{where}[{i}]") for i, v in enumerate(value)]


def _coerce_dict(value: Any, hint: Any, where: str) -> Any:
    if not isinstance(value, dict):
        raise ValueError(f"{where} must be a mapping, got a {kind_of(value)}")
    return dict(value)


def _coerce_bool(value: Any, hint: Any, where: str) -> Any:
    flag = as_bool(value)
    if flag is None:
        raise ValueError(f"{where} must be true or false, got {value!r}")
    return flag


def _coerce_mode(value: Any, hint: Any, where: str) -> Any:
    return Mode(file_mode(value, where))


def _coerce_number(value: Any, hint: Any, where: str) -> Any:
    if isinstance(value, bool):
        raise ValueError(f"{where} must be a number, got {value!r}")
    try:
        return hint(value)
    except (TypeError, ValueError):
        raise ValueError(f"{where} must be a number, got {value!r}") from None


def _coerce_str(value: Any, hint: Any, where: str) -> Any:
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        return str(value)
    raise ValueError(f"{where} must be a string, got a {kind_of(value)}")


_Coerce = Callable[[Any, Any, str], Any]
_BY_ORIGIN: dict[Any, _Coerce] = {typing.Union: _coerce_union, types.UnionType: _coerce_union,
                                  Literal: _coerce_literal, list: _coerce_list, dict: _coerce_dict}
_BY_TYPE: dict[Any, _Coerce] = {bool: _coerce_bool, Mode: _coerce_mode, int: _coerce_number,
                                float: _coerce_number, str: _coerce_str}
