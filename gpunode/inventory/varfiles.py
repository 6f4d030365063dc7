"""group_vars/ and host_vars/ beside an inventory: ``<name>``, ``<name>.yml|.yaml|.json``, ``<name>/*``."""

from __future__ import annotations

from pathlib import Path

from gpunode.inventory.layers import Origin, VarLayer, usage_error
from gpunode.inventory.raw import RawInventory
from gpunode.yamlfile import LineDict, load_yaml_text

VAR_EXTENSIONS = ("", ".yml", ".yaml", ".json")


def attach_var_files(raw: RawInventory, basedirs: list[Path]) -> None:
    """Load ``group_vars``/``host_vars`` under each base directory for every known group and host."""
    for base in basedirs:
        for group in raw.groups.values():
            group.files.extend(load_vars_file(p) for p in find_vars_files(base / "group_vars", group.name))
        for host in raw.hosts.values():
            host.files.extend(load_vars_file(p) for p in find_vars_files(base / "host_vars", host.name))


def find_vars_files(directory: Path, name: str) -> list[Path]:
    """Ansible's lookup: the first of ``name``, ``name.yml``, ``name.yaml``, ``name.json`` that exists;
    a directory contributes all its var files, recursively, in sorted order."""
    if "/" in name or name in (".", ".."):
        return []
    for ext in VAR_EXTENSIONS:
        candidate = directory / f"{name}{ext}"
        if candidate.is_dir():
            return _dir_files(candidate)
        if candidate.is_file():
            return [candidate]
    return []


def _dir_files(directory: Path) -> list[Path]:
    found: list[Path] = []
    for entry in sorted(directory.iterdir(), key=lambda p: p.name):
        if entry.name.startswith(".") or entry.name.endswith("~"):
            continue
        if entry.is_dir() and not entry.suffix:
            found.extend(_dir_files(entry))
        elif entry.is_file() and entry.suffix in VAR_EXTENSIONS:
            found.append(entry)
    return found


def load_vars_file(path: Path) -> VarLayer:
    """One vars file as a layer; it must be a mapping (or empty)."""
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise usage_error(
            Origin(source), f"cannot read vars file: {exc}", "check the file's permissions"
        ) from exc
    if text.lstrip().startswith("$ANSIBLE_VAULT"):
        raise usage_error(
            Origin(source, 1),
            "this vars file is Ansible Vault encrypted; gpunode cannot decrypt it",
            f"decrypt it (ansible-vault decrypt {source}) or move the secrets out of the inventory",
        )
    data = load_yaml_text(text, source)
    layer = VarLayer()
    if data is None:
        return layer
    if not isinstance(data, LineDict):
        raise usage_error(
            Origin(source, getattr(data, "line", None) or 1),
            "a vars file must be a mapping of variable: value",
            "write one 'name: value' per line at the top level of the file",
        )
    for key, value in data.items():
        layer.set(str(key), value, Origin(source, data.line_of(key)))
    return layer
