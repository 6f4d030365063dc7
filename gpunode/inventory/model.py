"""The loaded inventory: hosts with connection settings and resolved vars, groups, and selection."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpunode.inventory.data import Group, Host, InventoryData
from gpunode.inventory.patterns import select_hosts
from gpunode.inventory.render import ansible_list, graph

__all__ = ["Group", "Host", "Inventory"]


@dataclass
class Inventory(InventoryData):
    """Hosts (in inventory order) and groups (``all`` and ``ungrouped`` always exist), with host selection and the
    ``ansible-inventory`` views (the data is gpunode/inventory/data.py: patterns and views read it, never this)."""

    def select(self, limit: str | None) -> list[Host]:
        """Hosts matching an Ansible ``--limit`` pattern, in inventory order; unmatched is an error."""
        return select_hosts(self, limit)

    def to_ansible_list(self) -> dict[str, Any]:
        """The structure ``ansible-inventory --list`` prints (secrets redacted)."""
        return ansible_list(self)

    def graph(self, keep: set[str] | None = None) -> str:
        """The tree ``ansible-inventory --graph`` prints (only the `keep` hosts when given)."""
        return graph(self, keep)
