"""A user step kind from the project's `library/` folder beside the playbook (as Ansible's library/): loaded with the
playbook, said in the run output, validated like a built-in step; a kind clashing with a built-in one is refused."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from gpunode.errors import UsageError
from gpunode.playbook import load_playbook
from gpunode.steps import STEP_TYPES, build_step
from gpunode.steps.base import StepContext
from gpunode.steps.probe import ProbeOutput
from tests.conftest import run_cli
from tests.plan_cases import build_facts

MARKER = '''"""A project's own step: write a marker file once."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from gpunode.steps.base import Action, Step, StepContext, arg, register


@register
@dataclass
class Marker(Step):
    """Write `text` to `path` unless the file is there."""

    kind = "{kind}"
    needs_root = False
    facts_sections = frozenset()
    path: str = arg(doc="the marker file")
    text: str = arg("ready", "what it holds")

    def probe(self, facts):
        return {{"present": f"test -e {{shlex.quote(self.path)}} && echo yes"}}

    def plan(self, ctx: StepContext) -> list[Action]:
        if ctx.probe["present"].strip() == "yes":
            return []
        return [Action(summary=f"write {{self.path}}", reason="the marker is missing",
                       command=f"printf '%s\\\\n' {{shlex.quote(self.text)}} > {{shlex.quote(self.path)}}",
                       writes=self.path)]
'''


@pytest.fixture
def registry():
    """Kinds registered by a test's user step files are forgotten after it (docs/steps.md lists the registry)."""
    before = dict(STEP_TYPES._classes)
    yield
    STEP_TYPES._classes.clear()
    STEP_TYPES._classes.update(before)


def project(root: Path, kind: str, args: str, step_file: str = MARKER) -> Path:
    """A project: playbooks/site.yml using `kind`, and playbooks/library/marker.py defining it."""
    (root / "playbooks" / "library").mkdir(parents=True)
    (root / "playbooks" / "library" / "marker.py").write_text(step_file.format(kind=kind))
    (root / "playbooks" / "library" / "_helpers.py").write_text("raise RuntimeError('never imported')\n")
    book = root / "playbooks" / "site.yml"
    book.write_text(f"name: site\nsteps:\n  - name: mark\n    {kind}: {args}\n")
    return book


def test_a_user_step_kind_from_library_is_loaded_and_planned(tmp_path, registry):
    kind = f"marker_{uuid.uuid4().hex[:8]}"
    target = tmp_path / "ready"
    book = load_playbook(project(tmp_path, kind, f"{{path: {target}}}"))
    (user,) = book.library
    assert (user.path.name, user.kinds) == ("marker.py", (kind,))
    spec = book.steps[0]
    step = build_step(spec.kind, spec.args)
    facts = build_facts("debian-12", {})
    assert list(step.probe(facts)) == ["present"]
    ctx = StepContext(host=None, facts=facts, conn=None, check=True, probe=ProbeOutput({"present": ""}))  # type: ignore[arg-type]
    (action,) = step.plan(ctx)
    assert action.command == f"printf '%s\\n' ready > {target}"
    ctx.probe = ProbeOutput({"present": "yes\n"})
    assert step.plan(ctx) == []


def test_a_user_step_kind_runs_from_the_cli_and_the_run_says_its_file(tmp_path):
    kind = f"marker_{uuid.uuid4().hex[:8]}"
    target = tmp_path / "ready"
    book = project(tmp_path, kind, f"{{path: {target}, text: hello}}")
    logs = str(tmp_path / "logs")
    check = run_cli("provision", "-H", "localhost", "--playbook", str(book), "--check", "--log-dir", logs)
    assert check.code == 0, check.output
    assert f"user steps: {book.parent / 'library' / 'marker.py'} ({kind})" in check.output
    assert not target.exists()
    run = run_cli("provision", "-H", "localhost", "--playbook", str(book), "--log-dir", logs)
    assert run.code == 0, run.output
    assert target.read_text() == "hello\n"


def test_a_user_step_is_validated_like_a_built_in_one(tmp_path):
    kind = f"marker_{uuid.uuid4().hex[:8]}"
    book = project(tmp_path, kind, f"{{path: {tmp_path / 'x'}, colour: red}}")
    run = run_cli("provision", "-H", "localhost", "--playbook", str(book), "--check",
                  "--log-dir", str(tmp_path / "logs"))
    assert run.code == 2, run.output
    assert f"site.yml:4: unknown argument 'colour' for {kind}" in run.output
    assert "fix: see the step's class" in run.output and "marker.py" in run.output


def test_a_user_step_kind_clashing_with_a_built_in_one_is_refused_before_its_file_runs(tmp_path, registry):
    clash = MARKER.replace("from __future__", "import sys; sys.exit('ran')\nfrom __future__")
    book = project(tmp_path, "command", "{path: /x}", step_file=clash)
    with pytest.raises(UsageError, match="step kind 'command' is a built-in step") as caught:
        load_playbook(book)
    assert caught.value.source.endswith("library/marker.py") and caught.value.line == 17
    assert "another kind" in caught.value.fix


def test_a_user_step_file_that_registers_nothing_is_refused(tmp_path, registry):
    kind = f"marker_{uuid.uuid4().hex[:8]}"
    book = project(tmp_path, kind, "{path: /x}", step_file=MARKER.replace("@register\n", ""))
    with pytest.raises(UsageError, match="is declared but its class is not registered") as caught:
        load_playbook(book)
    assert "@register" in caught.value.fix
