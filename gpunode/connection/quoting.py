"""Every value that reaches a remote shell goes through here."""

from __future__ import annotations

import shlex
from collections.abc import Iterable


def q(value: object) -> str:
    """Quote one value for a POSIX shell."""
    return shlex.quote(str(value))


def join(words: Iterable[object]) -> str:
    """Quote and join words into one shell command."""
    return " ".join(q(w) for w in words)
