"""Which module declares which step kind, found by reading the step modules' source (no import).

A step kind is declared in one place: the `kind = "name"` class attribute of a step class in a module under
gpunode/steps/ (subpackages included). The scan reads each module's text with one regular expression (about 3 ms
for the whole package, once per process) instead of importing every module: a playbook imports only the step
modules it uses (tests/test_startup_imports.py). A new module dropped into gpunode/steps/ is found with no other
edit.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from gpunode.errors import GpunodeError

PACKAGE = __name__.rpartition(".")[0]  # the package this module is in and scans
STEPS_DIR = Path(__file__).resolve().parent

# a class-level `kind = "name"` (4 spaces in, optionally annotated, optionally followed by a comment)
_KIND = re.compile(r"""^    kind(?:\s*:\s*[\w\[\].]+)?\s*=\s*(["'])([A-Za-z_][\w-]*)\1\s*(?:#.*)?$""", re.MULTILINE)
_TOP_LEVEL = re.compile(r"^[^\s#)\]}\"']", re.MULTILINE)  # a line at column 0: a statement of the module itself


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
    """The `kind = "..."` attributes of the classes at the top level of one module's source."""
    tops = [m.start() for m in _TOP_LEVEL.finditer(source)]
    found = []
    for match in _KIND.finditer(source):
        owner = max((s for s in tops if s < match.start()), default=None)
        if owner is None or not source.startswith("class ", owner):
            continue  # inside a function (or a nested class): not a step's declaration
        line = source.count("\n", 0, match.start()) + 1
        found.append(Declaration(match.group(2), module, path, line))
    return found


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
