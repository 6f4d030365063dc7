"""`/proc/mounts` (`/proc/self/mounts`) lines, fstab(5) octal escapes undone."""

from __future__ import annotations

import re
from typing import NamedTuple


class MountLine(NamedTuple):
    """One mounted file system."""

    source: str
    target: str
    fstype: str
    options: str


def unescape(field: str) -> str:
    r"""`\040` (space), `\011` (tab), `\012`, `\134` (backslash) back to their characters."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def parse_mounts(text: str | None) -> list[MountLine]:
    """The mounts of `/proc/mounts` (source, target and type unescaped; the options as printed)."""
    mounts = []
    for line in (text or "").splitlines():
        parts = line.split(" ")
        if len(parts) >= 3:
            source, target, fstype = (unescape(p) for p in parts[:3])
            mounts.append(MountLine(source, target, fstype, parts[3] if len(parts) > 3 else ""))
    return mounts
