"""The inventory's data: hosts with connection settings and resolved vars, groups, and group membership."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpunode.inventory.raw import RawInventory


@dataclass
class Host:
    """One machine to provision: how to reach it and its fully resolved variables."""

    name: str
    address: str
    port: int = 22
    user: str | None = None
    key_file: str | None = None
    password: str | None = field(default=None, repr=False)
    become: bool = False
    become_password: str | None = field(default=None, repr=False)
    jump: str | None = None
    proxy_command: str | None = None
    known_hosts: str | None = None
    local: bool = False
    groups: list[str] = field(default_factory=list)
    vars: dict[str, Any] = field(default_factory=dict, repr=False)
    jump_key_file: str | None = None
    accept_new_host_keys: bool = False   # the inventory turned strict host key checking off (first use only)


@dataclass
class Group:
    """A group: direct hosts and children in order, and its own vars (inline, then group_vars files)."""

    name: str
    hosts: list[str] = field(default_factory=list)
    children: list[str] = field(default_factory=list)
    vars: dict[str, Any] = field(default_factory=dict, repr=False)
    parents: list[str] = field(default_factory=list)
    source: str = ""
    line: int | None = None


@dataclass
class InventoryData:
    """Hosts (in inventory order) and groups (``all`` and ``ungrouped`` always exist): what host patterns and the
    ``ansible-inventory`` views read (the model's `Inventory` adds those views as methods)."""

    hosts: dict[str, Host] = field(default_factory=dict)
    groups: dict[str, Group] = field(default_factory=dict)
    raw: RawInventory | None = field(default=None, repr=False, compare=False)

    def group_hosts(self, name: str) -> list[str]:
        """Names of the hosts in group ``name`` or any of its descendants, in inventory order."""
        if name == "all":
            return list(self.hosts)
        members: set[str] = set()
        pending, seen = [name], set()
        while pending:
            group = self.groups[pending.pop()]
            if group.name in seen:
                continue
            seen.add(group.name)
            members.update(group.hosts)
            pending.extend(group.children)
        return [host for host in self.hosts if host in members]
