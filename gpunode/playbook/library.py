"""User step kinds: the `library/` folder beside a playbook, as Ansible's `library/` beside a playbook holds the
project's own modules.

    playbooks/site.yml          # uses `- touch_marker: {path: /etc/ready}`
    playbooks/library/marker.py # @register @dataclass class TouchMarker(Step): kind = "touch_marker" ...

Each `*.py` file directly in the folder (not `_*.py`) is imported when a playbook of that folder is loaded, in name
order, after its `kind`s are read from its source (registry.declarations): a kind a built-in step already has is
refused before the file runs, and a declared kind the file does not register is refused after. Its steps are then
validated like the built-in ones (build_step: unknown or wrong arguments are file:line errors with the fix). The
files loaded are listed on the playbook (`Playbook.library`) and the run says them: code is never taken from a
folder silently. A file is imported once per process (by its resolved path).
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

from gpunode.errors import GpunodeError, UsageError
from gpunode.steps.kinds import STEP_TYPES
from gpunode.steps.registry import StepDeclarationError, declarations, declared

FOLDER = "library"  # Ansible's name for a project's own modules beside the playbook


@dataclass(frozen=True)
class UserSteps:
    """One user step file that was loaded and the kinds it registered."""

    path: Path
    kinds: tuple[str, ...]
    sha256: str

    @property
    def shown(self) -> str:
        return f"{self.path} ({', '.join(self.kinds)})"


_LOADED: dict[Path, UserSteps] = {}


def load_library(playbook: Path) -> list[UserSteps]:
    """Import the user step files of the `library/` folder beside `playbook` (none when there is no folder)."""
    folder = playbook.parent / FOLDER
    if not folder.is_dir():
        return []
    return [load_file(path) for path in sorted(folder.glob("*.py")) if not path.name.startswith("_")]


def load_file(path: Path) -> UserSteps:
    """One user step file: its kinds checked against the built-in ones, imported, each declared kind registered."""
    path = path.resolve()
    if path in _LOADED:
        return _LOADED[path]
    source = path.read_text(encoding="utf-8")
    digest = hashlib.sha256(source.encode()).hexdigest()
    module = f"_gpunode_library.{path.stem}_{hashlib.sha256(str(path).encode()).hexdigest()[:12]}"
    try:
        found = declarations(source, module, path)
    except SyntaxError as exc:
        raise UsageError(f"user step file: {exc.msg}", source=str(path), line=exc.lineno or 1,
                         fix="fix the Python syntax") from None
    builtin = declared()
    for declaration in found:
        if declaration.kind in builtin:
            raise UsageError(f"step kind {declaration.kind!r} is a built-in step ({builtin[declaration.kind].where})",
                             source=str(path), line=declaration.line,
                             fix="give your step another kind (a project prefix: `myproj_...`); a user step never "
                             "replaces a built-in one")
    if not found:
        raise UsageError(f"{FOLDER}/{path.name} declares no step kind", source=str(path), line=1,
                         fix=f'a user step file holds a Step class with `kind = "..."`; move other Python out of '
                         f"{FOLDER}/ or name it `_{path.name}` (files starting with _ are not loaded)")
    _import(path, module)
    kinds = tuple(d.kind for d in found)
    for declaration in found:
        cls = STEP_TYPES.registered(declaration.kind)
        if cls is None or cls.__module__ != module:
            raise UsageError(f"{declaration.kind!r} is declared but its class is not registered", source=str(path),
                             line=declaration.line,
                             fix="decorate the class with @register and @dataclass (from gpunode.steps.base and "
                             "dataclasses), as docs/writing-steps.md shows")
    _LOADED[path] = UserSteps(path, kinds, digest)
    return _LOADED[path]


def _import(path: Path, module: str) -> None:
    """Run the file as module `module`; any error in it is the user's, named with its file."""
    spec = importlib.util.spec_from_file_location(module, path)
    if spec is None or spec.loader is None:
        raise UsageError("cannot import this user step file", source=str(path), line=1)
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[module] = loaded  # dataclasses and typing.get_type_hints look the module up by name
    try:
        spec.loader.exec_module(loaded)
    except StepDeclarationError as exc:  # register refused a class (a kind taken, no @dataclass)
        sys.modules.pop(module, None)
        raise UsageError(exc.cause, source=str(path), line=_line_in(exc, path), fix=exc.fix) from None
    except GpunodeError:
        sys.modules.pop(module, None)
        raise
    except Exception as exc:  # the user's code: whatever it raises is reported as theirs
        sys.modules.pop(module, None)
        line = _line_in(exc, path)
        raise UsageError(f"loading this user step file failed: {type(exc).__name__}: {exc}", source=str(path),
                         line=line, fix="fix the error at that line (the file is imported as a Python module)") \
            from None


def _line_in(exc: BaseException, path: Path) -> int:
    """The line of `path` where `exc` was raised (its last frame in that file); 1 when none."""
    tb, line = exc.__traceback__, 1
    while tb is not None:
        if Path(tb.tb_frame.f_code.co_filename).resolve() == path:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def user_step_file(kind: str) -> Path | None:
    """The user step file that registered `kind`; None for a built-in kind (or an unknown one)."""
    return next((u.path for u in _LOADED.values() if kind in u.kinds), None)
