"""A step kind is declared once, by its class's `kind` attribute, and found by reading the step modules
(gpunode/steps/registry.py): a new module works from a playbook with no other edit; a kind declared twice is an
error naming both places."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from gpunode.steps.registry import STEPS_DIR, StepDeclarationError, declared, scan
from tests.conftest import run_cli

DROPPED = '''"""A step module dropped in by tests/test_step_registry.py (removed when the test ends)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from gpunode.steps.base import Action, Step, StepContext, arg, register


@register
@dataclass
class DroppedStep(Step):
    """Touch a file (a step that no table lists)."""

    kind = "{kind}"
    needs_root = False
    facts_sections = frozenset()
    path: str = arg(doc="the file to create")

    def plan(self, ctx: StepContext) -> list[Action]:
        return [Action(summary=f"touch {{self.path}}", command=f"touch {{shlex.quote(self.path)}}")]
'''


def test_a_step_module_dropped_into_the_package_is_usable_from_a_playbook(tmp_path):
    name = f"zz_dropped_{uuid.uuid4().hex[:8]}"
    module = STEPS_DIR / f"{name}.py"
    module.write_text(DROPPED.format(kind=name))
    try:
        book, touched = tmp_path / "p.yml", tmp_path / "touched"
        book.write_text(f"name: p\nsteps:\n  - name: dropped\n    {name}: {{path: {touched}}}\n")
        run = run_cli("provision", "-H", "localhost", "--playbook", str(book), "--log-dir", str(tmp_path / "logs"),
                      env={"PYTHONDONTWRITEBYTECODE": "1"})
        assert run.code == 0, run.output
        assert touched.exists()
    finally:
        module.unlink()
        for cached in (STEPS_DIR / "__pycache__").glob(f"{name}.*"):
            cached.unlink()
    assert not list(STEPS_DIR.rglob(f"{name}*"))


def _package(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


STEP = 'class {cls}(Step):\n    """doc"""\n\n    kind = "{kind}"\n    name: str = ""\n'


def test_two_modules_declaring_one_kind_are_refused_naming_both(tmp_path):
    root = _package(tmp_path, {"a.py": STEP.format(cls="A", kind="same"),
                               "sub/b.py": STEP.format(cls="B", kind="same")})
    with pytest.raises(StepDeclarationError, match="'same' is declared twice") as caught:
        scan(root, "pkg")
    assert f"{root / 'a.py'}:4" in str(caught.value) and f"{root / 'sub' / 'b.py'}:4" in str(caught.value)


def test_one_module_declaring_a_kind_twice_is_refused_naming_both_lines(tmp_path):
    twice = STEP.format(cls="A", kind="twice") + "\n\n" + STEP.format(cls="B", kind="twice")
    root = _package(tmp_path, {"a.py": twice})
    with pytest.raises(StepDeclarationError, match=f"declared twice: {root / 'a.py'}:4 and {root / 'a.py'}:11"):
        scan(root, "pkg")


def test_only_class_attributes_declare_a_kind(tmp_path):
    """A `kind = "..."` inside a function (containerd_config.py has one) declares nothing; subpackages count."""
    text = ('def f(x):\n    kind = "local"\n    return kind\n\n\n' + STEP.format(cls="A", kind="real")
            + '\n\ndef g():\n    kind = "other"  # a comment\n')
    root = _package(tmp_path, {"nested/deeper/m.py": text})
    (found,) = scan(root, "pkg").values()
    assert (found.kind, found.module, found.line) == ("real", "pkg.nested.deeper.m", 9)


def test_the_package_scan_finds_the_nfs_subpackage_and_no_module_twice():
    kinds = declared()
    assert kinds["nfs_mount"].module == "gpunode.steps.nfs.mount"
    assert kinds["line"].module == kinds["file"].module == "gpunode.steps.files"
    assert "" not in kinds  # Step's own empty `kind` declares nothing


def test_a_kind_is_found_in_any_class_attribute_form(tmp_path):
    """ClassVar-annotated, deeper indentation, a trailing comment: each declares; a nested class does not."""
    text = ('from typing import ClassVar\n\n\nclass A(Step):\n  kind: ClassVar[str] = "two_spaces"  # note\n\n\n'
            'class B(Step):\n        kind: "ClassVar[str]" = \'eight\'\n\n\n'
            'class C(Step):\n    class Inner:\n        kind = "nested"\n')
    root = _package(tmp_path, {"m.py": text})
    assert {k: d.line for k, d in scan(root, "pkg").items()} == {"two_spaces": 5, "eight": 9}


def test_kind_annotated_as_a_dataclass_field_is_refused_never_an_argument():
    """`kind: str = "x"` in a dataclass would make `kind` an argument of the step: register says what to write."""
    from dataclasses import dataclass

    from gpunode.steps.base import Step, register

    @dataclass
    class Wrong(Step):
        kind: str = "wrong_kind_field"  # type: ignore[misc]

    with pytest.raises(StepDeclarationError, match="would be a step argument") as caught:
        register(Wrong)
    assert 'kind = "wrong_kind_field"' in caught.value.fix
