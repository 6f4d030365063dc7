"""Parse an Ansible YAML inventory (``all:`` / groups with ``hosts:``, ``vars:``, ``children:``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpunode.inventory.hostpattern import expand_host_pattern
from gpunode.inventory.layers import Origin, usage_error
from gpunode.inventory.raw import RawInventory
from gpunode.values import kind_of
from gpunode.yamlfile import LineDict, load_yaml_text

_SECTIONS = ("hosts", "vars", "children")
_SHAPE = (
    "all:\n  hosts:\n    node1.example.com:\n  children:\n    gpu:\n      hosts:\n        gpu1.example.com:"
)


def parse_yaml_inventory(text: str, source: str | Path, raw: RawInventory) -> None:
    """Add the groups, hosts and vars of a YAML inventory to ``raw``."""
    source = str(source)
    data = load_yaml_text(text, source)
    if data is None or data == {}:
        raise usage_error(
            Origin(source, 1), "inventory file is empty", "add at least one group with hosts:\n" + _SHAPE
        )
    if not isinstance(data, dict):
        raise usage_error(
            Origin(source, _line(data, None, 1)),
            f"a YAML inventory must be a mapping of group names, not a {_kind(data)}",
            "start the file with a group such as:\n" + _SHAPE,
        )
    if "plugin" in data:
        raise usage_error(
            Origin(source, _line(data, "plugin", 1)),
            f"this is an Ansible inventory plugin config (plugin: {data['plugin']}), not a static inventory",
            f"export it first: ansible-inventory -i {source} --list --yaml > static.yml, then use static.yml",
        )
    for name, body in data.items():
        _parse_group(raw, _name(name, "group", Origin(source, _line(data, name, 1))), body, data, source, ())


def _parse_group(
    raw: RawInventory, name: str, body: Any, parent: Any, source: str, stack: tuple[int, ...]
) -> None:
    origin = Origin(source, _line(parent, name, 1))
    raw.group(name, origin)
    if body is None:
        return
    if not isinstance(body, dict):
        raise usage_error(
            origin,
            f"group {name!r} must be a mapping with hosts:, vars: or children:, not a {_kind(body)}",
            f"indent the group's content under '{name}:' as hosts:/vars:/children:, or leave it empty",
        )
    if id(body) in stack:
        raise usage_error(
            origin, f"group {name!r} contains itself through a YAML alias", "remove the recursive alias"
        )
    stack = (*stack, id(body))
    for key, value in body.items():
        key_origin = Origin(source, _line(body, key, origin.line or 1))
        if key not in _SECTIONS:
            raise usage_error(
                key_origin,
                f"unexpected key {key!r} in group {name!r}",
                "a group may only contain hosts:, vars: and children: (check the spelling and indentation)",
            )
        if value is None:
            continue
        if key == "vars":
            _parse_group_vars(raw, name, value, key_origin)
        elif key == "children":
            for child, child_body in _as_mapping(value, f"children of group {name!r}", key_origin).items():
                child_name = _name(child, "group", Origin(source, _line(value, child, key_origin.line or 1)))
                _parse_group(raw, child_name, child_body, value, source, stack)
                raw.add_child(name, child_name, Origin(source, _line(value, child, key_origin.line or 1)))
        else:
            _parse_hosts(raw, name, _as_mapping(value, f"hosts of group {name!r}", key_origin), key_origin)


def _parse_group_vars(raw: RawInventory, group: str, value: Any, origin: Origin) -> None:
    if not isinstance(value, dict):
        raise usage_error(
            origin,
            f"vars of group {group!r} must be a mapping, not a {_kind(value)}",
            "write each variable as 'name: value' indented under vars:",
        )
    for key, item in value.items():
        raw.set_group_var(group, str(key), item, Origin(origin.source, _line(value, key, origin.line or 1)))


def _parse_hosts(raw: RawInventory, group: str, hosts: dict, key_origin: Origin) -> None:
    source = key_origin.source
    for pattern, host_vars in hosts.items():
        origin = Origin(source, _line(hosts, pattern, key_origin.line))
        if host_vars is not None and not isinstance(host_vars, dict):
            raise usage_error(
                origin,
                f"vars of host {pattern!r} must be a mapping, not a {_kind(host_vars)}",
                f"write '{pattern}:' alone, or indent 'name: value' variables under it",
            )
        names, port = expand_host_pattern(_name(pattern, "host", origin), origin)
        for host in names:
            raw.add_host(host, group, origin, port)
            for key, item in (host_vars or {}).items():
                raw.set_host_var(
                    host, str(key), item, Origin(source, _line(host_vars, key, origin.line or 1))
                )


def _as_mapping(value: Any, what: str, origin: Origin) -> dict:
    if isinstance(value, str):
        return {value: None}
    if not isinstance(value, dict):
        raise usage_error(
            origin,
            f"{what} must be a mapping, not a {_kind(value)}",
            "write each name as 'name:' on its own line (a mapping), not as a '- name' list",
        )
    return value


def _name(value: Any, what: str, origin: Origin) -> str:
    if value is None or isinstance(value, (dict, list, bool)) or str(value).strip() == "":
        raise usage_error(
            origin, f"{what} name {value!r} is not a valid name", f"give the {what} a plain name"
        )
    return str(value)


def _line(container: Any, key: Any, fallback: int | None) -> int | None:
    if isinstance(container, LineDict):
        return container.line_of(key) if key is not None else container.line
    return getattr(container, "line", None) or fallback


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "mapping"
    if isinstance(value, list):
        return "list"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, str):
        return "string"
    return "number" if isinstance(value, (int, float)) else kind_of(value)
