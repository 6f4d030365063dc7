"""Consoles for human output: terminal width on a TTY, a wide fixed width in logs and pipes (no mid-line wraps)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # rich is imported when a console is made, not by every module that may print
    from rich.console import Console

PIPE_WIDTH = 160


def make_console(stderr: bool = False) -> Console:
    """No emoji codes (`:end:` stays text); user text goes through gpunode.report.text, never as markup."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, highlight=False, emoji=False, width=None if stream.isatty() else PIPE_WIDTH)
