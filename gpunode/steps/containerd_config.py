"""The nvidia runtime added to containerd's own config.toml, the way `nvidia-ctk runtime configure` does it.

Edited in place with tomlkit, so the user's comments, layout and every other key survive. A drop-in file is not
used: containerd before 2.0 replaces a whole plugin section with the one from an imported file, so a drop-in that
holds only the nvidia runtime wipes kubeadm's or the cloud's CRI settings (SystemdCgroup, sandbox_image, mirrors).

Checked against NVIDIA/nvidia-container-toolkit pkg/config/engine/containerd/config.go (AddRuntime): the new
runtime is a copy of the default low-level runtime's table (so it keeps `SystemdCgroup` and the rest of its options)
with `options.BinaryName` set, and `default_runtime_name` is set only when asked.
"""

from __future__ import annotations

import copy
import tomllib
from dataclasses import dataclass, field
from typing import Any

import tomlkit
from tomlkit.container import OutOfOrderTableProxy
from tomlkit.exceptions import TOMLKitError
from tomlkit.items import Table, Whitespace

RUNTIME = "nvidia"
RUNC_TYPE = "io.containerd.runc.v2"
# The CRI plugin's name per config version: 1 (containerd 1.0-1.x "cri"), 2 (containerd 1.x), 3 (containerd 2.x).
CRI_PLUGIN = {1: "cri", 2: "io.containerd.grpc.v1.cri", 3: "io.containerd.cri.v1.runtime"}
CRI_NAMES = {"cri", "io.containerd.grpc.v1.cri", "io.containerd.cri.v1.runtime", "io.containerd.cri.v1.images"}
MARKER = "Added by gpunode: the NVIDIA runtime (a copy of the default runtime's settings with the NVIDIA binary)."


class ConfigError(ValueError):
    """config.toml cannot be read; `line` and `column` locate the problem when known."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None) -> None:
        super().__init__(message)
        self.line, self.column = line, column


class LayoutError(ValueError):
    """config.toml is valid, but written in a shape gpunode cannot add a runtime to without rewriting the user's
    own lines (inline tables, dotted keys); the message names the place."""


@dataclass(frozen=True)
class Loaded:
    """What containerd runs with now: its CRI runtimes and default runtime (`containerd config dump`), and the
    built-in runc (`containerd config default`) for when even the loaded config lacks it."""

    runtimes: dict[str, dict[str, Any]] = field(default_factory=dict)
    default_name: str = "runc"
    builtin_runc: dict[str, Any] | None = None


@dataclass(frozen=True)
class RuntimeEdit:
    """The result of adding the runtime: the new file text and what changed, for the plan's reason."""

    text: str
    changes: tuple[str, ...]
    note: str = ""


def parse(text: str) -> tomlkit.TOMLDocument:
    """Parse config.toml, keeping comments and layout; ConfigError with line and column when it is not TOML."""
    try:
        return tomlkit.parse(text)
    except TOMLKitError as exc:
        line, column = getattr(exc, "line", None), getattr(exc, "col", None)
        message = str(exc).split(" at line ")[0].split(" (use ")[0]
        raise ConfigError(f"not valid TOML: {message}", line, column) from None


def config_version(doc: dict[str, Any], binary_major: int, empty: bool) -> int:
    """The config's schema version: its `version` key; a new file gets the binary's (2 for 1.x, 3 for 2.x)."""
    if empty:
        return 3 if binary_major >= 2 else 2
    version = doc.get("version", 1)  # containerd reads a file without `version` as version 1
    if not isinstance(version, int) or version not in CRI_PLUGIN:
        raise ConfigError(f"unsupported config version {version!r} (containerd knows 1, 2 and 3)")
    return version


def add_nvidia_runtime(text: str, binary_major: int, runtime_path: str, default_runtime: bool,
                       loaded: Loaded | None = None) -> RuntimeEdit:
    """`text` with the nvidia runtime (and, when asked, the default runtime name); every other byte kept.

    Once the file lists any runtime, containerd 1.x drops its built-in ones: when the file has no runtimes of its
    own, the runtimes containerd loads now are written out too, and the default runtime is restored when it is
    missing (a config written before containerd was installed). The result is checked: parsed again, it must
    hold exactly the old settings plus these additions, or LayoutError is raised and nothing is written.
    """
    loaded = loaded or Loaded()
    newline = "\r\n" if "\r\n" in text else "\n"
    text_lf = text.replace("\r\n", "\n")
    empty = not text_lf.strip()
    doc = parse(text_lf)
    if _cri_disabled(doc):
        return RuntimeEdit(text, (), note="the CRI plugin is disabled in config.toml (Docker's own containerd): "
                                          "Docker's daemon.json carries the nvidia runtime")
    version = config_version(doc, binary_major, empty)
    if empty:
        doc.add("version", version)
    path = ["plugins", CRI_PLUGIN[version], "containerd"]
    containerd = _table_at(doc, path)
    had_runtimes = isinstance(containerd.get("runtimes"), Table)
    runtimes = _table_at(containerd, ["runtimes"], path)
    default_name = str(containerd.get("default_runtime_name") or loaded.default_name or "runc")
    available = _available(loaded)
    indent = _child_indent(_indent_of(containerd))
    if not had_runtimes:
        changes = _write_out_loaded(runtimes, available, indent)
    else:
        changes = _restore_default(runtimes, default_name, available, indent)
    changes += _put_nvidia(runtimes, default_name, available, runtime_path, indent)
    if default_runtime and containerd.get("default_runtime_name") != RUNTIME:
        containerd["default_runtime_name"] = RUNTIME
        changes.append(f"default_runtime_name = {RUNTIME!r}")
    if not changes:
        return RuntimeEdit(text, ())
    result = tomlkit.dumps(doc)
    if not result.endswith("\n"):
        result += "\n"
    _check(text_lf, result, path)
    return RuntimeEdit(result.replace("\n", newline), tuple(changes))


def _available(loaded: Loaded) -> dict[str, dict[str, Any]]:
    """The runtimes containerd loads now, with the built-in runc when even those lack it."""
    available = dict(loaded.runtimes)
    if "runc" not in available and loaded.builtin_runc:
        available["runc"] = loaded.builtin_runc
    return available


def _child_indent(indent: int) -> int:
    """The indent of a runtime table under an indented containerd table (none when containerd is flush left)."""
    return indent + 2 if indent else 0


def _write_out_loaded(runtimes: Table, available: dict[str, dict[str, Any]], indent: int) -> list[str]:
    """The file lists no runtimes: write out the loaded ones (containerd 1.x drops its built-in runtimes once
    the file lists one)."""
    kept = [name for name in available if name != RUNTIME and name not in runtimes]
    for name in kept:
        runtimes[name] = _copy_table(available[name], indent)
    if not kept:
        return []
    return [f"write out the loaded runtime(s) {', '.join(kept)} (containerd drops its built-in "
            "runtimes once the file lists one)"]


def _restore_default(runtimes: Table, default_name: str, available: dict[str, dict[str, Any]],
                     indent: int) -> list[str]:
    """The file lists runtimes but not the default one: restore it from the loaded config when known."""
    if default_name in runtimes or default_name == RUNTIME or default_name not in available:
        return []
    runtimes[default_name] = _copy_table(available[default_name], indent)
    return [f"restore the default runtime {default_name} (missing: the CRI plugin cannot start)"]


def _put_nvidia(runtimes: Table, default_name: str, available: dict[str, dict[str, Any]], runtime_path: str,
                indent: int) -> list[str]:
    """Add the nvidia runtime as a copy of the default runtime (or runc), or converge the one already there."""
    base_name = default_name if default_name != RUNTIME and default_name in runtimes else "runc"
    base = _plain(runtimes.get(base_name)) or available.get(base_name, {})
    current = runtimes.get(RUNTIME)
    if isinstance(current, Table):
        return _converge_runtime(current, base, base_name, runtime_path)
    table = copy.deepcopy(base)
    table.setdefault("runtime_type", RUNC_TYPE)
    table["options"] = {**(table.get("options") or {}), "BinaryName": runtime_path}
    runtimes[RUNTIME] = _copy_table(table, indent, comment=MARKER)
    return [f"add the {RUNTIME} runtime ({base_name}'s settings, BinaryName {runtime_path})"]


def _check(old: str, new: str, path: list[str]) -> None:
    """The edit, read back by a strict TOML parser, holds the old settings plus runtimes and the default name
    (and a `version` when the file was new): anything else means tomlkit put something in the wrong place."""
    try:
        before, after = tomllib.loads(old), tomllib.loads(new)
    except tomllib.TOMLDecodeError as exc:
        raise LayoutError(f"adding the runtime to this layout would not be valid TOML ({exc})") from None
    where = ".".join(path)
    if not isinstance(_get(after, [*path, "runtimes", RUNTIME]), dict):
        raise LayoutError(f"the new runtime would not land under {where}.runtimes (dotted keys or inline tables "
                          "there); gpunode adds runtimes to [section] tables only")
    for config in (before, after):
        containerd = _get(config, path)
        if isinstance(containerd, dict):
            containerd.pop("runtimes", None)
            containerd.pop("default_runtime_name", None)
        _prune(config)
    if "version" not in before:
        after.pop("version", None)
    if after != before:
        raise LayoutError(f"adding the runtime would change settings outside {where}.runtimes (dotted keys or "
                          "inline tables there); gpunode adds runtimes to [section] tables only")


def _get(config: Any, path: list[str]) -> Any:
    for key in path:
        config = config.get(key) if isinstance(config, dict) else None
    return config


def _prune(config: dict[str, Any]) -> None:
    """Drop tables left empty (the super tables a new runtime needed), depth first."""
    for key in list(config):
        if isinstance(config[key], dict):
            _prune(config[key])
            if not config[key]:
                del config[key]


def _converge_runtime(current: Table, base: dict[str, Any], base_name: str, runtime_path: str) -> list[str]:
    """Fix only what gpunode owns in an existing nvidia runtime: its type, its binary and the cgroup driver of
    the runtime it copies."""
    changes = []
    if "runtime_type" not in current:
        current["runtime_type"] = base.get("runtime_type", RUNC_TYPE)
        changes.append("nvidia runtime_type")
    options = current.get("options")
    if not isinstance(options, Table):
        options = tomlkit.table()
        current["options"] = options
    if options.get("BinaryName") != runtime_path:
        options["BinaryName"] = runtime_path
        changes.append(f"nvidia BinaryName = {runtime_path!r}")
    systemd = (base.get("options") or {}).get("SystemdCgroup")
    if systemd is not None and options.get("SystemdCgroup") != systemd:
        options["SystemdCgroup"] = systemd  # a cgroup driver unlike the pods' (and kubelet's) breaks every GPU pod
        changes.append(f"nvidia SystemdCgroup = {str(systemd).lower()} (as {base_name})")
    return changes


def _copy_table(values: dict[str, Any], indent: int, comment: str = "") -> Table:
    """A new table holding a deep copy of `values` (sub-tables become [headers]), indented like its neighbours:
    `indent` spaces before its keys and two more for each level below."""
    table = tomlkit.table()
    if comment:
        table.add(tomlkit.comment(comment))
    step = 2 if indent else 0
    subtables = {k: v for k, v in values.items() if isinstance(v, dict)}
    for key, value in values.items():
        if key not in subtables:
            table.add(key, copy.deepcopy(value))
    for key, value in subtables.items():
        table.add(tomlkit.nl())
        table.add(key, _copy_table(value, indent + step))
    if not subtables:
        table.add(tomlkit.nl())
    table.trivia.indent = ""
    for _key, item in table.value.body:
        if not isinstance(item, Table | Whitespace):
            item.trivia.indent = " " * (indent + step)
    for key in subtables:
        table[key].trivia.indent = " " * (indent + step)
    return table


def _plain(item: Any) -> dict[str, Any]:
    return item.unwrap() if isinstance(item, Table) else {}


def _indent_of(table: Any) -> int:
    """How far a table's header is indented in the file (0 for a table that only exists implicitly)."""
    trivia = getattr(table, "trivia", None)
    return len(trivia.indent.replace("\t", "  ").strip("\n")) if trivia else 0


def _cri_disabled(doc: Any) -> bool:
    disabled = doc.get("disabled_plugins") or []
    return any(str(name) in CRI_NAMES for name in disabled)


def _table_at(parent: Any, path: list[str], above: list[str] | None = None) -> Any:
    """The table at `path` under `parent`, created (as a super table, no empty headers) where missing."""
    node = parent
    where = list(above or [])
    for key in path:
        where.append(key)
        child = node.get(key)
        if child is None:
            child = tomlkit.table(is_super_table=True)
            node[key] = child
        elif not isinstance(child, Table | OutOfOrderTableProxy):
            kind = "an inline table" if isinstance(child, dict) else f"a {type(child).__name__} value"
            raise LayoutError(f"{'.'.join(where)} is {kind}; gpunode adds runtimes to [section] tables only")
        node = child
    return node


def loaded_config(dump: str, default: str) -> Loaded:
    """What `containerd config dump` says containerd runs with, and runc from `containerd config default`."""
    runtimes, default_name = _cri_of(dump)
    builtin = _cri_of(default)[0].get("runc")
    return Loaded(runtimes, default_name or "runc", builtin)


def _cri_of(config: str) -> tuple[dict[str, dict[str, Any]], str]:
    if not config.strip():
        return {}, ""
    try:
        plugins = tomllib.loads(config).get("plugins", {})
    except tomllib.TOMLDecodeError:
        return {}, ""
    for version in (3, 2, 1):
        containerd = plugins.get(CRI_PLUGIN[version], {}).get("containerd")
        if isinstance(containerd, dict):
            runtimes = containerd.get("runtimes") or {}
            return ({n: t for n, t in runtimes.items() if isinstance(t, dict)},
                    str(containerd.get("default_runtime_name") or ""))
    return {}, ""
