"""The loaded inventory: hosts with connection settings and resolved vars, groups, and selection."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpunode.inventory.patterns import select_hosts
from gpunode.inventory.render import ansible_list, graph

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
class Inventory:
    """Hosts (in inventory order) and groups (``all`` and ``ungrouped`` always exist)."""

    hosts: dict[str, Host] = field(default_factory=dict)
    groups: dict[str, Group] = field(default_factory=dict)
    raw: RawInventory | None = field(default=None, repr=False, compare=False)

    def select(self, limit: str | None) -> list[Host]:
        """Hosts matching an Ansible ``--limit`` pattern, in inventory order; unmatched is an error."""
        return select_hosts(self, limit)

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

    def to_ansible_list(self) -> dict[str, Any]:
        """The structure ``ansible-inventory --list`` prints (secrets redacted)."""
        return ansible_list(self)

    def graph(self, keep: set[str] | None = None) -> str:
        """The tree ``ansible-inventory --graph`` prints (only the `keep` hosts when given)."""
        return graph(self, keep)
