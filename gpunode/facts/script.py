"""The text of facts.sh, the probe sent to hosts on stdin (`bash -s`)."""

from __future__ import annotations

from collections.abc import Iterable

from gpunode.facts.sections import script_prefix
from gpunode.scripts import script_text

SCRIPT_NAME = "facts.sh"


def facts_script(sections: Iterable[str] | None = None) -> str:
    """The facts.sh text (scripts/facts.sh); with `sections`, set to gather only those (gpunode/facts/sections.py)."""
    return (script_prefix(sections) if sections is not None else "") + script_text(SCRIPT_NAME)


def facts_subshell(redirections: str = "", sections: Iterable[str] | None = None) -> str:
    """Shell that runs facts.sh in its own bash (a heredoc), for embedding in a larger script."""
    prefix = f"bash {redirections} " if redirections else "bash "
    return f"{prefix}<<'__GPUNODE_FACTS_EOF__'\n{facts_script(sections)}\n__GPUNODE_FACTS_EOF__\n"
