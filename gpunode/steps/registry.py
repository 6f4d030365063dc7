"""Which module declares which step kind, found by reading the step modules' source (no import).

A step kind is declared in one place: the `kind` class attribute of a step class in a module under gpunode/steps/
(subpackages included), in any form Python allows: `kind = "name"`, `kind: ClassVar[str] = "name"`, any
indentation. Each module is parsed (ast) rather than imported: a playbook imports only the step modules it uses
(tests/test_startup_imports.py). A cheap text test skips the modules that cannot declare one. A new module dropped
into gpunode/steps/ is found with no other edit. `kind: str = "x"` in a dataclass would be an argument: `register`
refuses it (kinds.py).
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass
from pathlib import Path

from gpunode.errors import GpunodeError

PACKAGE = __name__.rpartition(".")[0]  # the package this module is in and scans
STEPS_DIR = Path(__file__).resolve().parent

_MAYBE = re.compile(r"^\s+kind\b", re.MULTILINE)  # a module without an indented `kind` declares none: not parsed
KIND_NAME = re.compile(r"[A-Za-z_][\w-]*")


class StepDeclarationError(GpunodeError):
    """A step kind declared twice (in one module or in two): which one a playbook means is unknowable."""


@dataclass(frozen=True)
class Declaration:
    """Where a step kind is declared: its module (`gpunode.steps.nfs.mount`), file and line."""

    kind: str
    module: str
    path: Path
    line: int

    @property
    def where(self) -> str:
        return f"{_shown(self.path)}:{self.line}"


def scan(root: Path = STEPS_DIR, package: str = PACKAGE) -> dict[str, Declaration]:
    """kind -> its declaration, for every module under `root`; a kind declared twice raises, naming both places."""
    found: dict[str, Declaration] = {}
    for path in sorted(root.rglob("*.py")):
        module = ".".join((package, *path.relative_to(root).with_suffix("").parts)).removesuffix(".__init__")
        for declaration in declarations(path.read_text(encoding="utf-8"), module, path):
            first = found.get(declaration.kind)
            if first:
                raise StepDeclarationError(
                    f"step kind {declaration.kind!r} is declared twice: {first.where} and {declaration.where}",
                    fix="give one of the two step classes another `kind`")
            found[declaration.kind] = declaration
    return found


def declarations(source: str, module: str, path: Path) -> list[Declaration]:
    """The `kind` attributes (plain or annotated) of the classes at the top level of one module's source; a
    `kind` inside a function or a nested class declares nothing."""
    if not _MAYBE.search(source):
        return []
    found = []
    for node in ast.parse(source, str(path)).body:
        if not isinstance(node, ast.ClassDef):
            continue
        for statement in node.body:
            name, value = _assigned(statement)
            if name != "kind" or not isinstance(value, ast.Constant) or not isinstance(value.value, str):
                continue
            if not KIND_NAME.fullmatch(value.value):
                continue  # Step's own "" declares nothing
            found.append(Declaration(value.value, module, path, statement.lineno))
    return found


def _assigned(statement: ast.stmt) -> tuple[str | None, ast.expr | None]:
    """`name = value` or `name: T = value` as (name, value); (None, None) for any other statement."""
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0],
                                                                                          ast.Name):
        return statement.targets[0].id, statement.value
    if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name) and statement.value:
        return statement.target.id, statement.value
    return None, None


@functools.cache
def declared() -> dict[str, Declaration]:
    """The package's step kinds, scanned once per process."""
    return scan()


def _shown(path: Path) -> str:
    """A path relative to the repository (gpunode/steps/x.py) when it is inside it, else as it is."""
    try:
        return str(path.relative_to(STEPS_DIR.parents[1]))
    except ValueError:
        return str(path)
