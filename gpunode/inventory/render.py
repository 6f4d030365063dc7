"""Print an inventory the way ``ansible-inventory --list`` and ``--graph`` do (secrets redacted)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpunode.inventory.secrets import redacted_vars

if TYPE_CHECKING:
    from gpunode.inventory.data import Group, InventoryData


def ansible_list(inventory: InventoryData) -> dict[str, Any]:
    """``{"_meta": {"hostvars": ...}, "all": {"children": [...]}, group: {"hosts", "children", "vars"}}``.

    Like ``ansible-inventory --list``: hostvars are fully resolved, empty keys and empty groups are left out;
    group ``vars`` (as with ``--export``) hold the group's own variables.
    """
    result: dict[str, Any] = {"_meta": {"hostvars": {}}}
    for name, host in inventory.hosts.items():
        if host.vars:
            result["_meta"]["hostvars"][name] = redacted_vars(host.vars)
    seen: set[str] = set()

    def add(group: Group) -> None:
        entry: dict[str, Any] = {}
        result[group.name] = entry
        if group.name != "all":
            entry["hosts"] = list(group.hosts)
        entry["children"] = list(group.children)
        entry["vars"] = redacted_vars(group.vars)
        for child in group.children:
            if child not in seen:
                seen.add(child)
                add(inventory.groups[child])
        for key in [key for key, value in entry.items() if not value]:
            del entry[key]
        if not entry:
            del result[group.name]

    add(inventory.groups["all"])
    return result


def graph(inventory: InventoryData, keep: set[str] | None = None) -> str:
    """``@all:`` then ``  |--@group:`` and ``  |  |--host`` lines, children before hosts; only `keep` hosts
    (and the groups that lead to them) when given, as ``ansible-inventory --graph --limit``."""
    lines: list[str] = []

    def shown(group: Group) -> bool:
        if keep is None:
            return True
        return any(h in keep for h in group.hosts) or any(shown(inventory.groups[c]) for c in group.children)

    def walk(group: Group, depth: int) -> None:
        lines.append(_indent(f"@{group.name}:", depth))
        for child in group.children:
            if shown(inventory.groups[child]):
                walk(inventory.groups[child], depth + 1)
        if group.name != "all":
            lines.extend(_indent(host, depth + 1) for host in group.hosts if keep is None or host in keep)

    walk(inventory.groups["all"], 0)
    return "\n".join(lines)


def _indent(text: str, depth: int) -> str:
    return "  |" * depth + "--" + text if depth else text
