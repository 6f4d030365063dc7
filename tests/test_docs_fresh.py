"""docs/steps.md, playbooks.md, tasks.md and findings.md are generated from the code (gpunode/docgen.py): they must
be what the code gives now, and every step argument carries a doc."""

from __future__ import annotations

import dataclasses

from gpunode.docgen import COMMAND, DOCS, generate, stale


def test_the_generated_docs_are_fresh():
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
