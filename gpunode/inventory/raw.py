"""The inventory as parsed, before variables are resolved: groups, hosts, edges and inline vars."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpunode.inventory.layers import Origin, VarLayer


@dataclass
class RawGroup:
    """A group as declared: direct hosts and children in order, inline vars, and group_vars files."""

    name: str
    origin: Origin
    hosts: list[str] = field(default_factory=list)
    children: dict[str, Origin] = field(default_factory=dict)
    inline: VarLayer = field(default_factory=VarLayer)
    files: list[VarLayer] = field(default_factory=list)


@dataclass
class RawHost:
    """A host as declared: inline vars merged over all its declarations, and host_vars files."""

    name: str
    origin: Origin
    inline: VarLayer = field(default_factory=VarLayer)
    files: list[VarLayer] = field(default_factory=list)


@dataclass
class RawInventory:
    """Builder that parsers fill; several sources may be parsed into one."""

    groups: dict[str, RawGroup] = field(default_factory=dict)
    hosts: dict[str, RawHost] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        builtin = Origin("<builtin>")
        self.group("all", builtin)
        self.group("ungrouped", builtin)

    def group(self, name: str, origin: Origin) -> RawGroup:
        """The group ``name``, created at ``origin`` if new."""
        if name not in self.groups:
            self.groups[name] = RawGroup(name, origin)
        elif self.groups[name].origin.source == "<builtin>" and origin.source != "<builtin>":
            self.groups[name].origin = origin
        return self.groups[name]

    def add_host(self, name: str, group: str, origin: Origin, port: int | None = None) -> RawHost:
        """Declare ``name`` in ``group``; a ``name:port`` pattern sets ``ansible_port`` like Ansible does."""
        host = self.hosts.get(name)
        if host is None:
            host = self.hosts[name] = RawHost(name, origin)
        members = self.group(group, origin).hosts
        if name not in members:
            members.append(name)
        if port is not None:
            host.inline.set("ansible_port", port, origin)
        return host

    def add_child(self, parent: str, child: str, origin: Origin) -> None:
        """Make ``child`` a child group of ``parent`` (both created if new)."""
        self.group(parent, origin)
        self.group(child, origin)
        self.groups[parent].children.setdefault(child, origin)

    def set_group_var(self, group: str, key: str, value: Any, origin: Origin) -> None:
        self.group(group, origin).inline.set(key, value, origin)

    def set_host_var(self, host: str, key: str, value: Any, origin: Origin) -> None:
        self.hosts[host].inline.set(key, value, origin)
