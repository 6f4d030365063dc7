"""Parse an Ansible INI inventory: ``[group]``, ``[group:vars]``, ``[group:children]``, host lines."""

from __future__ import annotations

import ast
import re
import shlex
import warnings
from pathlib import Path
from typing import Any

from gpunode.inventory.hostpattern import expand_host_pattern
from gpunode.inventory.layers import Origin, usage_error
from gpunode.inventory.raw import RawInventory

_SECTION = re.compile(r"^\[([^:\]\s]+)(?::(\w+))?\]\s*(?:[#;].*)?$")
_GROUP_NAME = re.compile(r"^([^:\]\s]+)\s*(?:[#;].*)?$")
_COMMENT = ("#", ";")
_EXAMPLE = "[gpu]\ngpu1.example.com ansible_user=admin\n\n[gpu:vars]\nansible_become=true"


def parse_ini_inventory(text: str, source: str | Path, raw: RawInventory) -> None:
    """Add the groups, hosts and vars of an INI inventory to ``raw``."""
    source = str(source)
    group, state, seen_any = "ungrouped", "hosts", False
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith(_COMMENT):
            continue
        seen_any = True
        origin = Origin(source, number)
        if line.startswith("[") and (line.endswith("]") or _SECTION.match(line)):
            group, state = _section(line, origin)
            raw.group(group, origin)
        elif line.startswith("[") and "]" not in line:  # `[gpu`: a section header, not a host range
            name = (line[1:].split() or ["group"])[0]
            raise usage_error(origin, f"section header {line!r} has no closing ']'", f"write [{name}]"
                              + ("" if ":" in name else f" (or [{name}:vars], [{name}:children])"))
        elif state == "hosts":
            _host_line(raw, group, line, origin)
        elif state == "vars":
            key, value = _var_line(line, group, origin)
            raw.set_group_var(group, key, value, origin)
        else:
            match = _GROUP_NAME.match(line)
            if not match:
                raise usage_error(
                    origin,
                    f"expected a group name in [{group}:children], got {line!r}",
                    "list one child group name per line (no spaces, ':' or ']')",
                )
            raw.add_child(group, match.group(1), origin)
    if not seen_any:
        raise usage_error(
            Origin(source, 1), "inventory file is empty", "add at least one group, e.g.:\n" + _EXAMPLE
        )


def _section(line: str, origin: Origin) -> tuple[str, str]:
    match = _SECTION.match(line)
    if not match:
        raise usage_error(
            origin,
            f"invalid section header {line!r}",
            "write [group], [group:vars] or [group:children] with no spaces inside the brackets",
        )
    group, kind = match.group(1), match.group(2) or "hosts"
    if kind not in ("hosts", "vars", "children"):
        raise usage_error(
            origin,
            f"section [{group}:{kind}] has unknown type {kind!r}",
            "use [group], [group:vars] or [group:children]",
        )
    return group, kind


def _host_line(raw: RawInventory, group: str, line: str, origin: Origin) -> None:
    try:
        tokens = shlex.split(line, comments=True)
    except ValueError as exc:
        raise usage_error(
            origin, f"cannot parse host line: {exc}", "close every quote; quote values with spaces: key='a b'"
        ) from exc
    if not tokens:
        return
    pattern, assignments = tokens[0], tokens[1:]
    if pattern.endswith(":"):
        raise usage_error(
            origin,
            f"host {pattern!r} ends with ':' (this INI line looks like YAML, or is missing a port)",
            "write host or host:PORT; a YAML inventory needs a .yml extension",
        )
    variables: dict[str, Any] = {}
    for token in assignments:
        key, eq, value = token.partition("=")
        if not eq or not key:
            raise usage_error(
                origin,
                f"expected key=value after host {pattern!r}, got {token!r}",
                "write host variables as key=value; quote values with spaces: key='a b'",
            )
        variables[key] = parse_ini_value(value)
    names, port = expand_host_pattern(pattern, origin)
    for name in names:
        raw.add_host(name, group, origin, port)
        for key, value in variables.items():
            raw.set_host_var(name, key, value, origin)


def _var_line(line: str, group: str, origin: Origin) -> tuple[str, Any]:
    key, eq, value = line.partition("=")
    if not eq or not key.strip():
        raise usage_error(
            origin,
            f"expected key=value in [{group}:vars], got {line!r}",
            "write one variable per line as key=value",
        )
    return key.strip(), parse_ini_value(value.strip())


def parse_ini_value(text: str) -> Any:
    """Type a value like Ansible's INI plugin: a Python literal (``22``, ``True``, ``[1]``) else the text."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text
    return _plain(value, text)


def _plain(value: Any, text: str) -> Any:
    if isinstance(value, (tuple, list, set)):
        return [_plain(item, str(item)) for item in value]
    if isinstance(value, dict):
        return {str(k): _plain(v, str(v)) for k, v in value.items()}
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    if value is ... or isinstance(value, complex):
        return text
    return value
