"""Remote-side shell scripts shipped in scripts/ (or inside the installed package)."""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path

_REPO_SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


@cache
def script_text(name: str) -> str:
    """The text of scripts/<name>, from the source tree or the installed package."""
    path = _REPO_SCRIPTS / name
    if path.is_file():
        return path.read_text()
    packaged = resources.files("gpunode").joinpath("scripts", name)
    if packaged.is_file():
        return packaged.read_text()
    raise FileNotFoundError(f"gpunode script {name} not found in {_REPO_SCRIPTS} or the installed package")
