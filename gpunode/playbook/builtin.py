"""Built-in playbooks and Packer templates: playbooks/ and packer/ in the repo, reached as gpunode/_playbooks and
gpunode/_packer (links in the source tree, package data in an installed wheel).

`--playbook gpu-node` (a bare name) means the built-in one; anything that looks like a path (a `/` or a `.yml`
suffix) is the user's file. A user's file never shadows a built-in unless it is given as a path.
"""

from __future__ import annotations

from pathlib import Path

from gpunode.errors import UsageError

PLAYBOOKS_DIR = Path(__file__).resolve().parents[1] / "_playbooks"
PACKER_DIR = Path(__file__).resolve().parents[1] / "_packer"
SUFFIXES = (".yml", ".yaml")


def builtin_names() -> list[str]:
    """Names of the built-in playbooks (base, gpu-node, ...), sorted."""
    return sorted(p.stem for p in PLAYBOOKS_DIR.glob("*.yml"))


def is_bare_name(ref: str) -> bool:
    """A name like `gpu-node`, not a path like `site.yml` or `./gpu-node`."""
    return bool(ref) and "/" not in ref and "\\" not in ref and not ref.endswith(SUFFIXES) and ref not in (".", "..")


def builtin_path(name: str, option: str = "--playbook") -> Path:
    """The file of built-in playbook `name`; unknown names are a usage error listing the built-ins, naming
    `option` (the command-line option the name came from)."""
    path = PLAYBOOKS_DIR / f"{name}.yml"
    if not path.is_file():
        raise UsageError(f"unknown built-in playbook {name!r}", source=option,
                         fix=f"built-in playbooks: {', '.join(builtin_names())} (`gpunode playbooks` lists their "
                         "variables); a file of your own is given as a path, e.g. ./site.yml")
    return path


def resolve_playbook(ref: str | Path, base: Path | None = None) -> Path:
    """A bare name -> the built-in playbook; a path -> that file (relative to `base` when given)."""
    text = str(ref)
    if isinstance(ref, str) and is_bare_name(text):
        return builtin_path(text)
    path = Path(text).expanduser()
    if base is not None and not path.is_absolute():
        path = base / path
    if not path.exists() and Path(text).stem in builtin_names() and Path(text).name == Path(text).stem + ".yml" \
            and len(Path(text).parts) == 1:
        raise UsageError("no such file here", source=text,
                         fix=f"a built-in playbook is named without .yml: --playbook {Path(text).stem} "
                         f"(or `- include: {Path(text).stem}`)")
    return path
