"""Commands gpunode prints in its fixes and docs must run as written: `gpunode provision HOST -p gpu-node` did not
(`provision` takes no positional host, and `-p` is invoke's own --pty, so invoke answered "No idea what 'gpu-node'
is!"). Every `gpunode provision ...` in the source, the node scripts and the docs is read here with its options."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from tests.conftest import run_cli

REPO = Path(__file__).resolve().parents[1]


def _written() -> list[tuple[str, str]]:
    found = []
    for path in [*REPO.glob("gpunode/**/*.py"), *REPO.glob("scripts/*"), *REPO.glob("docs/*.md"), REPO / "README.md"]:
        if path.is_file():
            text = path.read_text(errors="replace")
            found += [(str(path.relative_to(REPO)), m.group(0)) for m in re.finditer(r"gpunode provision [^`\"\n]*",
                                                                                      text)]
    return found


def test_provision_in_fixes_and_docs_uses_options_provision_has() -> None:
    help_text = run_cli("provision", "--help").stdout
    options = set(re.findall(r"(?<![\w-])(-{1,2}[a-zA-Z][\w-]*)", help_text)) | {"--help"}
    assert {"--playbook", "-i", "-l", "-H", "--var", "--check"} <= options and "-p" not in options
    bad = []
    for where, command in _written():
        words = shlex.split(command.replace("[", " ").replace("]", " "), posix=False)[2:]
        prose = ("with", "the", "and", "on", "it", "runs", "options")  # "gpunode provision with the ..." in a sentence
        if words and not words[0].startswith("-") and words[0] not in prose:
            bad.append(f"{where}: {command!r} (provision takes no positional {words[0]!r})")
        bad += [f"{where}: {command!r} ({w} is no provision option)" for w in words
                if re.fullmatch(r"-{1,2}[a-zA-Z][\w-]*", w) and w not in options]
    assert not bad, "\n".join(bad)
