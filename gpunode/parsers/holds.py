"""Held (version-locked) packages: `apt-mark showhold` and dnf/yum `versionlock list`."""

from __future__ import annotations

import re

# One `versionlock list` entry without its `.*`: the name, an optional epoch, version and release.
_LOCK_ENTRY = re.compile(r"^(?P<name>[A-Za-z0-9][\w.+-]*?)-(?:\d+:)?[^-\s:]+-[^-\s]+$")


def parse_apt_showhold(text: str | None) -> set[str]:
    """Names from `apt-mark showhold` (one a line; an architecture qualifier `name:arch` is dropped)."""
    return {line.strip().split(":")[0] for line in (text or "").splitlines() if line.strip()}


def parse_versionlock_list(text: str | None) -> set[str]:
    """Names from versionlock's list: `name-EPOCH:VERSION-RELEASE.*` (dnf) or `EPOCH:name-VERSION-RELEASE.*`
    (yum); excludes (`!name...`) and messages are skipped."""
    held = set()
    for line in (text or "").splitlines():
        entry = re.sub(r"^\d+:", "", line.strip()).removesuffix(".*")
        match = _LOCK_ENTRY.match(entry)
        if match:
            held.add(match.group("name"))
    return held
