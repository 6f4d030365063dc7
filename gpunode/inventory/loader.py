"""Load inventory files and directories (YAML or INI, detected) and the vars directories beside them."""

from __future__ import annotations

import re
from pathlib import Path

from gpunode.errors import UsageError
from gpunode.inventory.ini_source import parse_ini_inventory
from gpunode.inventory.model import Inventory
from gpunode.inventory.raw import RawInventory
from gpunode.inventory.resolve import resolve
from gpunode.inventory.varfiles import attach_var_files
from gpunode.inventory.yaml_source import parse_yaml_inventory
from gpunode.yamlfile import decode_utf8

YAML_EXTENSIONS = (".yml", ".yaml", ".json")
INI_EXTENSIONS = (".ini",)
# Ansible's INVENTORY_IGNORE_EXTS and always-ignored names for inventory directories
IGNORED_SUFFIXES = (
    ".pyc",
    ".pyo",
    ".swp",
    ".bak",
    "~",
    ".rpm",
    ".md",
    ".txt",
    ".rst",
    ".orig",
    ".cfg",
    ".retry",
)
IGNORED_NAMES = ("group_vars", "host_vars", "vars_plugins")
_INI_SECTION = re.compile(r"^\[[^:\]\s]+(?::\w+)?\]\s*(?:[#;].*)?$")


def load_inventory(sources: list[str | Path] | str | Path) -> Inventory:
    """Parse every source (file or directory) into one inventory; nothing is returned partly loaded."""
    paths = [Path(sources)] if isinstance(sources, (str, Path)) else [Path(s) for s in sources]
    if not paths:
        raise UsageError("no inventory given", fix="pass an inventory file or directory, e.g. -i inventory/")
    raw = RawInventory()
    basedirs: list[Path] = []
    for path in paths:
        if path.is_dir():
            files = inventory_files(path)
            if not files:
                raise UsageError(
                    "no inventory files in this directory",
                    fix="add a hosts.yml or hosts.ini (group_vars/ and host_vars/ alone define no hosts)",
                    source=str(path),
                )
            for file in files:
                parse_file(file, raw)
            base = path
        elif path.is_file():
            parse_file(path, raw)
            base = path.parent
        else:
            raise UsageError("inventory not found", fix="check the path given with -i", source=str(path))
        if base.resolve() not in [b.resolve() for b in basedirs]:
            basedirs.append(base)
    attach_var_files(raw, basedirs)
    return resolve(raw)


def inventory_files(directory: Path) -> list[Path]:
    """Inventory files in a directory, recursively and sorted, skipping what Ansible skips."""
    found: list[Path] = []
    for entry in sorted(directory.iterdir(), key=lambda p: p.name):
        name = entry.name
        if name.startswith(".") or name in IGNORED_NAMES or name.endswith(IGNORED_SUFFIXES):
            continue
        if entry.is_dir():
            found.extend(inventory_files(entry))
        elif entry.is_file():
            found.append(entry)
    return found


def parse_file(path: Path, raw: RawInventory) -> None:
    """Parse one inventory file into ``raw`` as YAML or INI."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read inventory: {exc}", fix="check the file", source=str(path)) from exc
    text = decode_utf8(data, str(path))  # not UTF-8: file:line and how to convert it
    text = text.removeprefix("\ufeff")  # a byte order mark (Windows editors): read past it, as YAML readers do
    if detect_format(path, text) == "yaml":
        parse_yaml_inventory(text, path, raw)
    else:
        parse_ini_inventory(text, path, raw)
    raw.sources.append(str(path))


def detect_format(path: Path, text: str) -> str:
    """``"yaml"`` or ``"ini"``: by extension, else by the first line that is not blank or a comment."""
    suffix = path.suffix.lower()
    if suffix in YAML_EXTENSIONS:
        return "yaml"
    if suffix in INI_EXTENSIONS:
        return "ini"
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", ";")):
            continue
        if _INI_SECTION.match(stripped):
            return "ini"
        if stripped.startswith(("---", "{")) or re.match(r"^[^\s=]+:\s*(#.*)?$", stripped):
            return "yaml"
        return "ini"
    return "ini"
