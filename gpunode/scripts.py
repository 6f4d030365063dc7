"""Remote-side shell scripts: scripts/ in the repo, reached as gpunode/_scripts (a link in the source tree,
package data in an installed wheel)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

SCRIPTS_DIR = Path(__file__).resolve().parent / "_scripts"


@cache
def script_text(name: str) -> str:
    """The text of scripts/<name>."""
    path = SCRIPTS_DIR / name
    if not path.is_file():
        raise FileNotFoundError(f"gpunode script {name} not found in {SCRIPTS_DIR}; reinstall gpunode")
    return path.read_text(encoding="utf-8")


def gpu_evidence_script() -> str:
    """gpu_evidence.sh with the /dev/char section (dev_char_links.sh, run in a subshell of its own so its `exit`
    ends only itself) before the closing `@@evidence end`: verify-gpu and collect send this."""
    end = 'echo "@@evidence end"'
    text = script_text("gpu_evidence.sh")
    section = f'echo "@@evidence dev-char"\n(\nset -- ""\n{script_text("dev_char_links.sh")}\n)\n{end}'
    return text.replace(end, section, 1)
