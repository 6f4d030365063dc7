"""docs/steps.md, playbooks.md, tasks.md and findings.md are generated from the code (gpunode/docgen/): they must
be what the code gives now, and every step argument carries a doc."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from gpunode.docgen import COMMAND, DOCS, generate, stale


def test_the_generated_docs_are_fresh():
    assert Path(__file__).resolve().parents[1] / "docs" == DOCS  # the checkout's docs/, nowhere else
    names = stale()
    assert not names, f"stale: {', '.join(f'docs/{n}' for n in names)}; regenerate with `.venv/bin/{COMMAND}`"


def test_generating_twice_gives_the_same_text_and_no_machine_paths():
    first, second = generate(), generate()
    assert first == second
    for name, text in first.items():
        assert str(DOCS.parent) not in text and "/home/" not in text and "/tmp/" not in text, name


def test_every_step_argument_has_a_doc():
    from gpunode.steps.base import STEP_TYPES, arg_doc

    missing = [f"{kind}.{f.name}" for kind in sorted(STEP_TYPES) for f in dataclasses.fields(STEP_TYPES[kind])
               if not arg_doc(f)]
    assert missing == [], "declare them as `name: type = arg(default, \"doc\")` (gpunode/steps/base.py)"


def test_a_stale_page_is_named_with_the_command_that_regenerates_it(tmp_path, capsys):
    from gpunode.docgen import main

    assert main(["--out", str(tmp_path)]) == 0
    (tmp_path / "steps.md").write_text("old\n")
    assert main(["--check", "--out", str(tmp_path)]) == 1
    assert f"{tmp_path / 'steps.md'} is stale: run `{COMMAND}`" in capsys.readouterr().err


def test_the_steps_task_prints_the_reference_a_wheel_user_cannot_open():
    """Refusals say `gpunode steps --show KIND` (the wheel carries no docs/): it prints that kind's section of
    docs/steps.md, the bare task lists every kind, and an unknown kind is bad input (exit 2) listing them."""
    from gpunode.steps.registry import declared
    from tests.conftest import run_cli

    listing = run_cli("steps")
    assert listing.code == 0 and [line.split()[0] for line in listing.stdout.splitlines()] == sorted(declared())
    shown = run_cli("steps", "--show", "nfs_mount")
    steps_md = (DOCS / "steps.md").read_text()
    assert shown.code == 0 and shown.stdout.strip() in steps_md and "| `server` |" in shown.stdout
    bad = run_cli("steps", "--show", "nfs")
    assert bad.code == 2 and "nfs_mount" in bad.stderr
