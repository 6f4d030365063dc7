"""The nvidia runtime added to containerd's own config.toml, the way `nvidia-ctk runtime configure` does it.

Edited in place with tomlkit, so the user's comments, layout and every other key survive. A drop-in file is not
used: containerd before 2.0 replaces a whole plugin section with the one from an imported file, so a drop-in that
holds only the nvidia runtime wipes kubeadm's or the cloud's CRI settings (SystemdCgroup, sandbox_image, mirrors).

Checked against NVIDIA/nvidia-container-toolkit pkg/config/engine/containerd/config.go (AddRuntime): the new
runtime is a copy of the runc runtime's table (so it keeps `SystemdCgroup` and the rest of runc's options) with
`options.BinaryName` set, and `default_runtime_name` is set only when asked.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import tomlkit
from tomlkit.exceptions import TOMLKitError
from tomlkit.items import Table, Whitespace

RUNTIME = "nvidia"
RUNC_TYPE = "io.containerd.runc.v2"
# The CRI plugin's name per config version: 1 (containerd 1.0-1.x "cri"), 2 (containerd 1.x), 3 (containerd 2.x).
CRI_PLUGIN = {1: "cri", 2: "io.containerd.grpc.v1.cri", 3: "io.containerd.cri.v1.runtime"}
MARKER = "# Added by gpunode: the NVIDIA runtime (a copy of runc's settings with the NVIDIA runtime binary)."


class ConfigError(ValueError):
    """config.toml cannot be read; `line` and `column` locate the problem when known."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None) -> None:
        super().__init__(message)
        self.line, self.column = line, column


@dataclass(frozen=True)
class RuntimeEdit:
    """The result of adding the runtime: the new file text and what changed, for the plan's reason."""

    text: str
    changes: tuple[str, ...]


def config_version(doc: dict[str, Any], binary_major: int, empty: bool) -> int:
    """The config's schema version: its `version` key; a new file gets the binary's (2 for 1.x, 3 for 2.x)."""
    if empty:
        return 3 if binary_major >= 2 else 2
    version = doc.get("version", 1)  # containerd reads a file without `version` as version 1
    if not isinstance(version, int) or version not in CRI_PLUGIN:
        raise ConfigError(f"unsupported config version {version!r} (containerd knows 1, 2 and 3)")
    return version


def parse(text: str) -> tomlkit.TOMLDocument:
    """Parse config.toml, keeping comments and layout; ConfigError with line and column when it is not TOML."""
    try:
        return tomlkit.parse(text)
    except TOMLKitError as exc:
        line, column = getattr(exc, "line", None), getattr(exc, "col", None)
        message = str(exc).split(" at line ")[0]
        raise ConfigError(f"not valid TOML: {message}", line, column) from None


def add_nvidia_runtime(text: str, binary_major: int, runtime_path: str, default_runtime: bool,
                       loaded: dict[str, dict[str, Any]] | None = None) -> RuntimeEdit:
    """`text` with the nvidia runtime (and, when asked, the default runtime name); every other byte kept.

    `loaded` holds the runtimes containerd runs with now (`containerd config dump`, with runc from `containerd
    config default` when even that lacks it). They matter when the file has no `runtimes` of its own: as soon as
    it lists one, containerd 1.x drops its built-in runc, so the runtimes it loaded are written out too.
    """
    empty = not text.strip()
    doc = parse(text)
    version = config_version(doc, binary_major, empty)
    if empty:
        doc.add("version", version)
    containerd = _table_at(doc, ["plugins", CRI_PLUGIN[version], "containerd"])
    runtimes = _table_at(containerd, ["runtimes"])
    loaded = {name: table for name, table in (loaded or {}).items() if name != RUNTIME}
    changes: list[str] = []
    current = runtimes.get(RUNTIME)
    runc = runtimes.get("runc")
    runc_plain = runc.unwrap() if isinstance(runc, Table) else loaded.get("runc", {})
    if not isinstance(current, Table):
        indent = _indent_of(runc) if isinstance(runc, Table) else _indent_of(containerd)
        kept = [name for name in loaded if name not in runtimes]
        for name in kept:
            runtimes[name] = _copy_table(loaded[name], indent)
        if kept:
            changes.append(f"write out the loaded runtime(s) {', '.join(kept)} (containerd drops its built-in "
                           "runtimes once the file lists one)")
        base = copy.deepcopy(runc_plain)
        base.setdefault("runtime_type", RUNC_TYPE)
        base["options"] = {**(base.get("options") or {}), "BinaryName": runtime_path}
        runtimes[RUNTIME] = _copy_table(base, indent, comment=MARKER)
        changes.append(f"add the {RUNTIME} runtime (runc's settings, BinaryName {runtime_path})")
    else:
        changes += _converge_runtime(current, runc_plain, runtime_path)
    if default_runtime and containerd.get("default_runtime_name") != RUNTIME:
        containerd["default_runtime_name"] = RUNTIME
        changes.append(f"default_runtime_name = {RUNTIME!r}")
    if not changes:
        return RuntimeEdit(text, ())
    result = tomlkit.dumps(doc)
    if not result.endswith("\n"):
        result += "\n"
    return RuntimeEdit(result, tuple(changes))


def _copy_table(values: dict[str, Any], indent: int, comment: str = "") -> Table:
    """A new table holding a deep copy of `values` (sub-tables become [headers]), indented like its neighbours:
    `indent` spaces before keys and two more for each level below."""
    table = tomlkit.table()
    if comment:
        table.add(tomlkit.comment(comment.removeprefix("# ")))
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
    _set_indent(table, "", indent + step)
    for key in subtables:
        table[key].trivia.indent = " " * (indent + step)
    return table


def _set_indent(table: Table, header: str, keys: int) -> None:
    """Header indentation (as text) and key indentation (spaces) of a table gpunode adds."""
    table.trivia.indent = header
    for _key, item in table.value.body:
        if not isinstance(item, Table | Whitespace):
            item.trivia.indent = " " * keys


def _indent_of(table: Table) -> int:
    """How far a table's header is indented in the file (0 for a table that only exists implicitly)."""
    return len(table.trivia.indent.replace("\t", "  ").strip("\n"))


def _converge_runtime(current: Table, runc: dict[str, Any], runtime_path: str) -> list[str]:
    """Fix only what gpunode owns in an existing nvidia runtime: its type, its binary and runc's cgroup driver."""
    changes = []
    if "runtime_type" not in current:
        current["runtime_type"] = runc.get("runtime_type", RUNC_TYPE)
        changes.append("nvidia runtime_type")
    options = current.get("options")
    if not isinstance(options, Table):
        options = tomlkit.table()
        current["options"] = options
    if options.get("BinaryName") != runtime_path:
        options["BinaryName"] = runtime_path
        changes.append(f"nvidia BinaryName = {runtime_path!r}")
    systemd = (runc.get("options") or {}).get("SystemdCgroup")
    if systemd is not None and options.get("SystemdCgroup") != systemd:
        options["SystemdCgroup"] = systemd  # a cgroup driver unlike runc's (and kubelet's) breaks every GPU pod
        changes.append(f"nvidia SystemdCgroup = {str(systemd).lower()} (as runc)")
    return changes


def _table_at(parent: Any, path: list[str]) -> Table:
    """The table at `path` under `parent`, created (as a super table, no empty headers) where missing."""
    node = parent
    for key in path:
        child = node.get(key)
        if child is None:
            child = tomlkit.table(is_super_table=True)
            node[key] = child
        elif not isinstance(child, Table):
            raise ConfigError(f"{'.'.join(path)}: expected a table at {key!r}, found {type(child).__name__}")
        node = child
    return node


def loaded_runtimes(dump: str, default: str) -> dict[str, dict[str, Any]]:
    """The CRI runtimes containerd loads (`containerd config dump`), with runc from its built-in defaults
    (`containerd config default`) when the loaded config has none."""
    runtimes = _runtimes_of(dump)
    if "runc" not in runtimes:
        runc = _runtimes_of(default).get("runc")
        if runc:
            runtimes["runc"] = runc
    return runtimes


def _runtimes_of(config: str) -> dict[str, dict[str, Any]]:
    if not config.strip():
        return {}
    try:
        plugins = tomlkit.parse(config).unwrap().get("plugins", {})
    except TOMLKitError:
        return {}
    for version in (3, 2, 1):
        runtimes = plugins.get(CRI_PLUGIN[version], {}).get("containerd", {}).get("runtimes")
        if isinstance(runtimes, dict):
            return {name: table for name, table in runtimes.items() if isinstance(table, dict)}
    return {}
