"""The text of facts.sh, the probe sent to hosts on stdin (`bash -s`)."""

from __future__ import annotations

from gpunode.scripts import script_text

SCRIPT_NAME = "facts.sh"


def facts_script() -> str:
    """The facts.sh text (scripts/facts.sh)."""
    return script_text(SCRIPT_NAME)


def facts_subshell(redirections: str = "") -> str:
    """Shell that runs facts.sh in its own bash (a heredoc), for embedding in a larger script."""
    prefix = f"bash {redirections} " if redirections else "bash "
    return f"{prefix}<<'__GPUNODE_FACTS_EOF__'\n{facts_script()}\n__GPUNODE_FACTS_EOF__\n"
