"""Ansible host patterns for ``--limit``: groups, hosts, globs, ``~regex``, ``!exclude``, ``&intersect``."""

from __future__ import annotations

import fnmatch
import re
from typing import TYPE_CHECKING

from gpunode.errors import UsageError
from gpunode.inventory.hostpattern import is_ipv6

if TYPE_CHECKING:
    from gpunode.inventory.data import Host, InventoryData

_SOURCE = "--limit"


def split_patterns(limit: str) -> list[str]:
    """``"a,b"`` or (when there is no comma) ``"a:b"`` -> ``["a", "b"]``; an IPv6 address stays whole."""
    text = limit.strip()
    if "," in text:
        parts = text.split(",")
    elif is_ipv6(text) or is_ipv6(text.lstrip("!&")):
        parts = [text]
    else:
        parts = _split_colons(text)
    return [part.strip() for part in parts if part.strip()]


def _split_colons(text: str) -> list[str]:
    """Split on ``:`` outside ``[...]`` (host ranges and regex classes keep their colons)."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char == ":" and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        if char == "[":
            depth += 1
        elif char == "]" and depth:
            depth -= 1
        current.append(char)
    parts.append("".join(current))
    return parts


def select_hosts(inventory: InventoryData, limit: str | None) -> list[Host]:
    """Hosts matching ``limit`` in inventory order: union, then ``&`` intersect, then ``!`` exclude."""
    patterns = split_patterns(limit) if limit else []
    plain = [p for p in patterns if p[0] not in "!&"]
    intersect = [p[1:] for p in patterns if p[0] == "&"]
    exclude = [p[1:] for p in patterns if p[0] == "!"]
    chosen: set[str] = set()
    for pattern in plain or ["all"]:
        chosen |= match_pattern(inventory, pattern)
    for pattern in intersect:
        chosen &= match_pattern(inventory, pattern, shown=f"&{pattern}")
    for pattern in exclude:
        chosen -= match_pattern(inventory, pattern, shown=f"!{pattern}")
    return [host for name, host in inventory.hosts.items() if name in chosen]


def match_pattern(inventory: InventoryData, pattern: str, shown: str | None = None) -> set[str]:
    """Host names one pattern matches; matching nothing at all is a UsageError."""
    if pattern in ("all", "*"):
        return set(inventory.hosts)
    if pattern in inventory.hosts:
        return {pattern}
    matcher = _compile(pattern)
    groups = [name for name in inventory.groups if matcher.match(name)]
    found = {host for group in groups for host in inventory.group_hosts(group)}
    if not groups or pattern.startswith("~") or any(c in pattern for c in ".?*["):
        found |= {name for name in inventory.hosts if matcher.match(name)}
    if not groups and not found:
        known = ", ".join(g for g in inventory.groups if g not in ("all", "ungrouped")) or "(none)"
        raise UsageError(
            f"no host or group matches {shown or pattern!r}; known groups: {known}",
            fix="use a group or host name from the inventory, a glob like 'gpu-*', or '~regex'",
            source=_SOURCE,
        )
    return found


def _compile(pattern: str) -> re.Pattern[str]:
    if pattern.startswith("~"):
        try:
            return re.compile(pattern[1:])
        except re.error as exc:
            raise UsageError(
                f"bad regular expression {pattern!r}: {exc}",
                fix="fix the regex after '~', e.g. ~gpu-0[1-4]",
                source=_SOURCE,
            ) from exc
    return re.compile(fnmatch.translate(pattern))
