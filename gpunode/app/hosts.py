"""Choosing hosts: `-i` inventories and/or ad-hoc `-H a,b`, narrowed by `--limit` (or a playbook's `hosts:`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpunode.errors import UsageError

if TYPE_CHECKING:
    from gpunode.inventory import Host, Inventory


def load_hosts(inventory: list[str] | None, hosts: str | None, limit: str | None,
               limit_source: str = "--limit") -> tuple[Inventory, list[Host]]:
    """Hosts from `-i` inventories and/or ad-hoc `-H a,b`, narrowed by `--limit` (or a playbook's `hosts:`)."""
    from gpunode.distros import example_login_user
    from gpunode.inventory import adhoc_inventory, load_inventory

    if not inventory and not hosts:
        raise UsageError("no hosts: give an inventory (-i FILE) or hosts (-H host1,host2)",
                         fix=f"e.g. gpunode provision -i inventory/aws-gpu.yml, or -H {example_login_user}@10.0.1.5")
    base = load_inventory(inventory) if inventory else None
    inv = adhoc_inventory(hosts, base) if hosts else base
    assert inv is not None
    selected = _select(inv, limit, limit_source)
    if not selected and limit and inv.hosts:
        raise UsageError("no hosts selected", source=limit_source, fix=f"check {limit_source} and the inventory")
    if not selected:
        empty = [g for g in inv.groups if g not in ("all", "ungrouped") and not inv.group_hosts(g)]
        listed = f"; groups without hosts: {', '.join(empty)}" if empty else ""
        raise UsageError(f"the inventory has no hosts{listed}",
                         source=", ".join(inventory or []) or "-H",
                         fix="add hosts under a group; a [group:children] entry must name a group defined with its "
                         "own [name] section (or children:/hosts: in YAML)")
    return inv, selected


def _select(inv: Inventory, limit: str | None, limit_source: str) -> list[Host]:
    """inv.select(limit); a pattern that matches nothing names where it was given (--limit, HOST, hosts:)."""
    try:
        return inv.select(limit)
    except UsageError as exc:
        if exc.source != "--limit" or limit_source == "--limit":
            raise
        cause = exc.cause.removeprefix(f"{exc.source}: ")
        raise UsageError(cause, source=limit_source, fix=exc.fix) from exc
