"""`inventory`: show groups, hosts and resolved variables, like ansible-inventory."""

from __future__ import annotations

import json

import yaml

from gpunode.app.hosts import load_hosts
from gpunode.errors import UsageError
from gpunode.inventory import redacted_vars


def show_inventory(inventory: list[str], hosts: str | None, limit: str | None, graph: bool, host: str | None,
                   as_json: bool) -> str:
    """`--list` (JSON, the default), `--graph`, or `--host H` (YAML, or JSON with --json)."""
    inv, selected = load_hosts(inventory, hosts, limit)
    if host:
        if host not in inv.hosts:
            raise UsageError(f"no host named {host!r} in the inventory", source="--host",
                             fix=f"known hosts: {', '.join(list(inv.hosts)[:20])}")
        data = redacted_vars(inv.hosts[host].vars)
        return json.dumps(data, indent=2, default=str) if as_json else yaml.safe_dump(data, sort_keys=True)
    if graph:
        return inv.graph({h.name for h in selected} if limit else None)
    data = inv.to_ansible_list()
    if limit:
        keep = {h.name for h in selected}
        data["_meta"]["hostvars"] = {k: v for k, v in data["_meta"]["hostvars"].items() if k in keep}
    return json.dumps(data, indent=2, default=str)
