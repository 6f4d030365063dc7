"""Locate the text of facts.sh, the probe sent to hosts on stdin (`bash -s`)."""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path

SCRIPT_NAME = "facts.sh"


def _repo_path() -> Path:
    # repo layout: <root>/gpunode/facts/script.py and <root>/scripts/facts.sh
    return Path(__file__).resolve().parents[2] / "scripts" / SCRIPT_NAME


@functools.cache
def facts_script() -> str:
    """The facts.sh text: from the source tree, else from the installed package data."""
    repo = _repo_path()
    if repo.is_file():
        return repo.read_text(encoding="utf-8")
    try:
        packaged = resources.files("gpunode").joinpath("scripts", SCRIPT_NAME)
        if packaged.is_file():
            return packaged.read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError, NotADirectoryError):
        pass
    raise FileNotFoundError(
        f"{SCRIPT_NAME} not found: looked for {repo} (source tree) and gpunode/scripts/{SCRIPT_NAME} "
        "(installed package data); reinstall gpunode or run from a checkout"
    )
