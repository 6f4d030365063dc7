"""The text of facts.sh, the probe sent to hosts on stdin (`bash -s`)."""

from __future__ import annotations

from collections.abc import Iterable
from shlex import quote as q

from gpunode.facts.sections import script_prefix
from gpunode.scripts import script_text

SCRIPT_NAME = "facts.sh"


def facts_script(sections: Iterable[str] | None = None) -> str:
    """The facts.sh text (scripts/facts.sh); with `sections`, set to gather only those (gpunode/facts/sections.py)."""
    return (script_prefix(sections) if sections is not None else "") + script_text(SCRIPT_NAME)


def facts_subshell(redirections: str = "", sections: Iterable[str] | None = None) -> str:
    """Shell that runs facts.sh in its own bash, for embedding in a larger script.

    The script is bash's `-c` argument, not a heredoc: bash reads a script from a pipe (a heredoc is one) a byte
    at a time, which costs facts.sh's 23 KB as many read() calls (~20 ms of CPU on the host)."""
    return f"bash -c {q(facts_script(sections))} gpunode-facts {redirections} </dev/null\n".replace("  ", " ")
