"""Build the final Inventory from parsed data: check the group graph, then resolve each host's variables."""

from __future__ import annotations

from gpunode.inventory.connvars import connection_settings
from gpunode.inventory.layers import VarLayer, merge_layers, usage_error
from gpunode.inventory.model import Group, Host, Inventory
from gpunode.inventory.raw import RawGroup, RawInventory


def resolve(raw: RawInventory) -> Inventory:
    """Ansible's rules: parentless groups under ``all``, lone hosts in ``ungrouped``, vars by precedence."""
    _check_children(raw)
    parents = _parents(raw)
    depth: dict[str, int] = {}
    for name in raw.groups:
        _depth(name, parents, depth)
    priority = {name: _priority(group) for name, group in raw.groups.items()}
    direct = _direct_groups(raw)
    groups = _public_groups(raw, parents, direct)

    def precedence(name: str) -> tuple[int, int, str]:
        return depth[name], priority[name], name

    hosts: dict[str, Host] = {}
    for name, raw_host in raw.hosts.items():
        member_of = sorted(_ancestors(direct[name], parents) - {"all"}, key=precedence)
        layers: list[VarLayer] = [raw.groups["all"].inline]
        layers += [raw.groups[g].inline for g in member_of]
        layers += raw.groups["all"].files
        layers += [layer for g in member_of for layer in raw.groups[g].files]
        layers += [raw_host.inline, *raw_host.files]
        resolved = merge_layers(layers)
        settings = connection_settings(name, resolved)
        hosts[name] = Host(name=name, groups=["all", *member_of], vars=resolved.values, **settings)
    return Inventory(hosts=hosts, groups=groups, raw=raw)


def _check_children(raw: RawInventory) -> None:
    """Reject ``all`` as a child and any cycle, naming it as ``a -> b -> a`` at the line that closes it."""
    for group in raw.groups.values():
        if "all" in group.children:
            raise usage_error(
                group.children["all"],
                f"group 'all' cannot be a child of {group.name!r}",
                "every group is already under 'all'; remove 'all' from the children",
            )
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for child, origin in raw.groups[name].children.items():
            if state.get(child) == 1:
                cycle = " -> ".join([*path[path.index(child) :], name, child])
                raise usage_error(
                    origin,
                    f"group children form a cycle: {cycle}",
                    f"remove {child!r} from the children of {name!r} (a group cannot contain itself)",
                )
            if state.get(child) is None:
                visit(child, [*path, name])
        state[name] = 2

    for name in raw.groups:
        if name not in state:
            visit(name, [])


def _parents(raw: RawInventory) -> dict[str, list[str]]:
    parents: dict[str, list[str]] = {name: [] for name in raw.groups}
    for group in raw.groups.values():
        for child in group.children:
            parents[child].append(group.name)
    for name, found in parents.items():
        if name != "all" and not found:
            found.append("all")
    return parents


def _depth(name: str, parents: dict[str, list[str]], memo: dict[str, int]) -> int:
    """Longest path from ``all`` (Ansible's group depth)."""
    if name not in memo:
        memo[name] = 0 if name == "all" else 1 + max(_depth(p, parents, memo) for p in parents[name])
    return memo[name]


def _priority(group: RawGroup) -> int:
    value = group.inline.values.get("ansible_group_priority", 1)
    if isinstance(value, bool) or not (str(value).isascii() and str(value).strip().lstrip("-").isdigit()):
        raise usage_error(
            group.inline.origins.get("ansible_group_priority", group.origin),
            f"group {group.name!r}: ansible_group_priority {value!r} is not a whole number",
            "set ansible_group_priority to a number (higher wins over groups of the same depth)",
        )
    return int(value)


def _direct_groups(raw: RawInventory) -> dict[str, list[str]]:
    """Each host's direct groups; a host only in ``all``/``ungrouped`` is in ``ungrouped``, others are not."""
    direct: dict[str, list[str]] = {name: [] for name in raw.hosts}
    for group in raw.groups.values():
        for host in group.hosts:
            direct[host].append(group.name)
    for name, found in direct.items():
        real = [g for g in found if g not in ("all", "ungrouped")]
        direct[name] = real or ["ungrouped"]
    return direct


def _ancestors(names: list[str], parents: dict[str, list[str]]) -> set[str]:
    found: set[str] = set()
    pending = list(names)
    while pending:
        name = pending.pop()
        if name not in found:
            found.add(name)
            pending.extend(parents[name])
    return found


def _public_groups(
    raw: RawInventory, parents: dict[str, list[str]], direct: dict[str, list[str]]
) -> dict[str, Group]:
    groups: dict[str, Group] = {}
    for name, group in raw.groups.items():
        hosts = [h for h in raw.hosts if name in direct[h]] if name == "ungrouped" else list(group.hosts)
        if name == "all":
            hosts = list(group.hosts)
            children = ["ungrouped", *[c for c in group.children if c != "ungrouped"]]
            children += [
                g for g, found in parents.items() if found == ["all"] and g not in children and g != "all"
            ]
        else:
            children = list(group.children)
        merged = merge_layers([group.inline, *group.files]).values
        builtin = group.origin.source == "<builtin>"
        groups[name] = Group(
            name=name,
            hosts=hosts,
            children=children,
            vars=merged,
            parents=parents[name],
            source="" if builtin else group.origin.source,
            line=None if builtin else group.origin.line,
        )
    return groups
