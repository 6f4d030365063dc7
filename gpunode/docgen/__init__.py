"""Reference docs generated from the code into docs/: steps and their arguments, built-in playbooks and their
variables, tasks and their options, diagnose findings and their fixes, the image builders.

`python -m gpunode.docgen` writes them; `--check` exits 1 naming the stale files (tests/test_docs_fresh.py runs it).
The output is deterministic: sorted, no dates, no counts, no absolute paths.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from gpunode.docgen.clouds import clouds_md
from gpunode.docgen.findings import findings_md
from gpunode.docgen.gpu_models import gpu_models_md
from gpunode.docgen.pages import playbooks_md, steps_md, tasks_md
from gpunode.docgen.where import COMMAND, DOCS

PAGES: dict[str, Callable[[], str]] = {"steps.md": steps_md, "playbooks.md": playbooks_md, "tasks.md": tasks_md,
                                       "findings.md": findings_md, "clouds.md": clouds_md,
                                       "gpu-models.md": gpu_models_md}


def generate() -> dict[str, str]:
    """file name -> its text, for every generated page."""
    return {name: make() for name, make in PAGES.items()}


def stale(docs: Path = DOCS) -> list[str]:
    """The generated pages whose file in `docs` is missing or differs from what the code gives now."""
    return [name for name, text in generate().items()
            if not (docs / name).exists() or (docs / name).read_text(encoding="utf-8") != text]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 naming the stale pages")
    parser.add_argument("--out", type=Path, default=DOCS, help="the folder (default: the repository's docs/)")
    options = parser.parse_args(argv)
    if options.check:
        names = stale(options.out)
        for name in names:
            print(f"{options.out / name} is stale: run `{COMMAND}`", file=sys.stderr)
        return 1 if names else 0
    options.out.mkdir(parents=True, exist_ok=True)
    for name, text in generate().items():
        (options.out / name).write_text(text, encoding="utf-8")
        print(options.out / name)
    return 0
