"""The text of facts.sh, the probe sent to hosts on stdin (`bash -s`)."""

from __future__ import annotations

from gpunode.scripts import script_text

SCRIPT_NAME = "facts.sh"


def facts_script() -> str:
    """The facts.sh text (scripts/facts.sh)."""
    return script_text(SCRIPT_NAME)
