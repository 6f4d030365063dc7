"""Ansible host patterns in inventories: ``name``, ``name:port``, ``[v6]:port``, ranges ``web[01:03]``."""

from __future__ import annotations

import ipaddress
import re
import string

from gpunode.inventory.layers import Origin, usage_error

_BRACKETED = re.compile(r"\[([^\]]+)\](?::(\d*))?")
_RANGE_FIX = "write a range as [BEGIN:END] or [BEGIN:END:STEP], e.g. web[01:10].example.com or node[a:f]"


def is_ipv6(text: str) -> bool:
    """True if ``text`` is an IPv6 address (no brackets, no port)."""
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


def expand_host_pattern(pattern: str, origin: Origin) -> tuple[list[str], int | None]:
    """Split off ``:port`` and expand ranges: ``web[1:2]:2222`` -> ``(["web1", "web2"], 2222)``."""
    host, port = split_port(pattern, origin)
    names = expand_ranges(host, origin) if "[" in host else [host]
    return names, port


def split_port(pattern: str, origin: Origin) -> tuple[str, int | None]:
    """``host[:port]``; IPv6 is bare (``::1``) or bracketed (``[::1]:22``); ``[a:b]`` is a range."""
    text = pattern.strip()
    bracketed = _BRACKETED.fullmatch(text)
    if bracketed and is_ipv6(bracketed.group(1)):
        return bracketed.group(1), _port(bracketed.group(2), pattern, origin)
    colons = _colons_outside_brackets(text, origin)
    if not colons:
        return text, None
    if len(colons) == 1:
        return text[: colons[0]], _port(text[colons[0] + 1 :], pattern, origin)
    if is_ipv6(text):
        return text, None
    raise usage_error(
        origin,
        f"host pattern {pattern!r} has several ':' but is not an IPv6 address",
        "write host:port, or an IPv6 address with a port as [2001:db8::1]:22",
    )


def _port(digits: str | None, pattern: str, origin: Origin) -> int | None:
    if digits is None:
        return None
    if not _is_number(digits):
        raise usage_error(
            origin,
            f"host pattern {pattern!r}: the part after ':' must be a port number",
            "write host:PORT with a number, or drop the ':'",
        )
    return int(digits)


def _colons_outside_brackets(text: str, origin: Origin) -> list[int]:
    depth, colons = 0, []
    for index, char in enumerate(text):
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        elif char == ":" and depth == 0:
            colons.append(index)
        if depth not in (0, 1):
            break
    if depth != 0:
        raise usage_error(origin, f"host pattern {text!r} has unbalanced brackets", _RANGE_FIX)
    return colons


def expand_ranges(pattern: str, origin: Origin) -> list[str]:
    """Expand every ``[begin:end(:step)]`` range like Ansible (zero padding kept, letters allowed)."""
    if "[" not in pattern:
        return [pattern]
    head, _, rest = pattern.partition("[")
    body, closed, tail = rest.partition("]")
    if not closed:
        raise usage_error(origin, f"host range in {pattern!r} has no closing ']'", _RANGE_FIX)
    names: list[str] = []
    for item in _range_items(body, pattern, origin):
        names.extend(expand_ranges(f"{head}{item}{tail}", origin))
    return names


def _range_items(body: str, pattern: str, origin: Origin) -> list[str]:
    bounds = body.split(":")
    if len(bounds) not in (2, 3):
        raise usage_error(
            origin, f"host range [{body}] in {pattern!r} must be begin:end or begin:end:step", _RANGE_FIX
        )
    begin, end = bounds[0] or "0", bounds[1]
    step_text = bounds[2] if len(bounds) == 3 else "1"
    if not end:
        raise usage_error(origin, f"host range [{body}] in {pattern!r} has no end value", _RANGE_FIX)
    if not _is_number(step_text) or int(step_text) < 1:
        raise usage_error(
            origin, f"host range [{body}] in {pattern!r}: step must be a positive number", _RANGE_FIX
        )
    step = int(step_text)
    letters = string.ascii_letters
    if len(begin) == 1 and len(end) == 1 and begin in letters and end in letters:
        first, last = letters.index(begin), letters.index(end)
        if first > last:
            raise usage_error(
                origin, f"host range [{body}] in {pattern!r} must have begin <= end", _RANGE_FIX
            )
        return list(letters[first : last + 1 : step])
    if not (_is_number(begin) and _is_number(end)):
        raise usage_error(
            origin, f"host range [{body}] in {pattern!r} must be two numbers or two letters", _RANGE_FIX
        )
    width = len(begin) if begin.startswith("0") and len(begin) > 1 else 0
    if width and width != len(end):
        raise usage_error(
            origin,
            f"host range [{body}] in {pattern!r}: zero-padded begin and end must be equally long",
            _RANGE_FIX,
        )
    if int(begin) > int(end):
        raise usage_error(origin, f"host range [{body}] in {pattern!r} must have begin <= end", _RANGE_FIX)
    return [str(n).zfill(width) for n in range(int(begin), int(end) + 1, step)]


def _is_number(text: str) -> bool:
    """ASCII digits only: "²".isdigit() is True, but int("²") raises."""
    return text.isascii() and text.isdigit()
