"""Hosts given on the command line (``-H a,b,user@c:2222``) as an inventory of their own."""

from __future__ import annotations

import copy

from gpunode.errors import UsageError
from gpunode.inventory.hostpattern import is_ipv6, split_port
from gpunode.inventory.layers import Origin, VarLayer
from gpunode.inventory.model import Inventory
from gpunode.inventory.raw import RawInventory
from gpunode.inventory.resolve import resolve

_SOURCE = "-H"


def parse_adhoc_entry(entry: str) -> tuple[str, str | None, int | None]:
    """``user@host:port`` -> ``(host, user, port)``; host may be ``[v6]:port`` or a bare IPv6 address."""
    origin = Origin(_SOURCE)
    user, at, rest = entry.strip().rpartition("@")
    if at and not user:
        raise UsageError(
            f"{entry!r} has an empty user before '@'", fix="write user@host or just host", source=_SOURCE
        )
    host, port = (rest, None) if is_ipv6(rest) else split_port(rest, origin)
    if not host or any(c in host for c in " []/"):
        raise UsageError(
            f"{entry!r} is not a host",
            fix="write host, user@host, host:port or [2001:db8::1]:port",
            source=_SOURCE,
        )
    return host, (user or None), port


def adhoc_inventory(spec: str, base: Inventory | None = None) -> Inventory:
    """Hosts from a comma list; a name known in ``base`` keeps its settings there, others join ``ungrouped``.

    New hosts get ``base``'s ``all``/``ungrouped`` variables (group_vars/all.yml applies);
    ``user@`` and ``:port`` given on the command line override everything else.
    """
    entries = [parse_adhoc_entry(e) for e in spec.split(",") if e.strip()]
    if not entries:
        raise UsageError(
            "no hosts given", fix="list hosts separated by commas: -H gpu1,admin@gpu2:2222", source=_SOURCE
        )
    raw = copy.deepcopy(base.raw) if base is not None and base.raw is not None else RawInventory()
    overrides = Origin(_SOURCE)
    for host, user, port in entries:
        if host not in raw.hosts:
            raw.add_host(host, "ungrouped", overrides)
        record = raw.hosts[host]
        record.files = [*record.files, _override_layer(user, port, overrides)]
    full = resolve(raw)
    return subset(full, [host for host, _, _ in entries])


def _override_layer(user: str | None, port: int | None, origin: Origin) -> VarLayer:
    layer = VarLayer()
    if user:
        layer.set("ansible_user", user, origin)
    if port is not None:
        layer.set("ansible_port", port, origin)
    return layer


def subset(inventory: Inventory, names: list[str]) -> Inventory:
    """Only the hosts ``names`` (in the order given, duplicates dropped) and the groups that hold them."""
    keep = list(dict.fromkeys(names))
    hosts = {name: inventory.hosts[name] for name in keep}
    groups = {}
    for name, group in inventory.groups.items():
        members = set(inventory.group_hosts(name)) & set(keep)
        if members or name in ("all", "ungrouped"):
            kept = copy.copy(group)
            kept.hosts = [h for h in group.hosts if h in hosts]
            kept.children = [
                c for c in group.children if c == "ungrouped" or set(inventory.group_hosts(c)) & set(keep)
            ]
            groups[name] = kept
    return Inventory(hosts=hosts, groups=groups, raw=inventory.raw)
