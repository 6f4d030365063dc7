"""Turn a host's resolved variables into connection settings (native names and Ansible names)."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any

from gpunode.inventory.layers import Origin, Resolved, usage_error
from gpunode.inventory.model import Host
from gpunode.inventory.sshargs import SshOptions, parse_ssh_args
from gpunode.values import FALSE_WORDS, TRUE_WORDS

LOCAL_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
_TRUE = TRUE_WORDS
_FALSE = FALSE_WORDS - {""}
_SSH_ARG_VARS = ("ansible_ssh_common_args", "ansible_ssh_extra_args")

# Each setting: native name first, then the Ansible names. An Ansible name (`ansible_user`...) always wins, at
# whatever level it is set (the one at the highest level among them); the native short name applies only where no
# Ansible name is set, so an application's own `user` or `port` variable never changes how gpunode connects.
ADDRESS = ("address", "ansible_host", "ansible_ssh_host")
PORT = ("port", "ansible_port", "ansible_ssh_port")
USER = ("user", "ansible_user", "ansible_ssh_user")
KEY = ("key", "ansible_ssh_private_key_file", "ansible_private_key_file")
PASSWORD = ("password", "ansible_password", "ansible_ssh_pass", "ansible_ssh_password")
BECOME = ("become", "ansible_become")
BECOME_PASSWORD = ("become_password", "ansible_become_password", "ansible_become_pass")
CONNECTION = ("connection", "ansible_connection")
SETTINGS = (ADDRESS, PORT, USER, KEY, PASSWORD, BECOME, BECOME_PASSWORD, CONNECTION)


@dataclass(frozen=True)
class Picked:
    """The winning variable for one setting."""

    name: str
    value: Any
    origin: Origin
    rank: int


def pick(resolved: Resolved, names: tuple[str, ...]) -> Picked | None:
    """The variable for one setting: the Ansible names win (highest level first), else the native name."""
    best: Picked | None = None
    for name in names[1:]:
        if name in resolved.values and (best is None or resolved.rank[name] > best.rank):
            best = Picked(name, resolved.values[name], resolved.origins[name], resolved.rank[name])
    if best is None and names[0] in resolved.values:
        name = names[0]
        best = Picked(name, resolved.values[name], resolved.origins[name], resolved.rank[name])
    return best


def with_extra_vars(host: Host, extra: dict[str, Any]) -> Host:
    """The host as `--var` sees it: extra vars win over the inventory, connection variables included (Ansible)."""
    names = {n for setting in SETTINGS for n in setting} | set(_SSH_ARG_VARS) | {"jump", "known_hosts"}
    if not names & set(extra):
        return host
    resolved = Resolved(dict(host.vars), {k: Origin("<inventory>") for k in host.vars}, {k: 0 for k in host.vars})
    for key, value in extra.items():
        resolved.values[key], resolved.origins[key], resolved.rank[key] = value, Origin("--var"), 1
    return dataclasses.replace(host, vars=resolved.values, **connection_settings(host.name, resolved))


def connection_settings(host: str, resolved: Resolved) -> dict[str, Any]:
    """Keyword arguments for ``Host`` (address, port, user, ...) from the host's resolved variables."""
    ssh, ssh_rank, ssh_origin = _ssh_options(resolved)
    address = _text(pick(resolved, ADDRESS))
    jump, proxy_command, jump_key = _proxy(resolved, ssh, ssh_rank)
    return {
        "address": address or host,
        "port": _port(host, pick(resolved, PORT), ssh.port, ssh_origin),
        "user": _text(pick(resolved, USER)) or ssh.user,
        "key_file": _path(_text(pick(resolved, KEY)) or ssh.key_file),
        "password": _text(pick(resolved, PASSWORD)),
        "become": _bool(host, pick(resolved, BECOME)),
        "become_password": _text(pick(resolved, BECOME_PASSWORD)),
        "jump": jump,
        "jump_key_file": _path(jump_key),
        "proxy_command": proxy_command,
        "known_hosts": _path(_text(pick(resolved, ("known_hosts",)))),
        "local": _is_local(host, address, pick(resolved, CONNECTION), pick(resolved, PORT) or ssh.port),
        "accept_new_host_keys": _accept_new_keys(host, resolved, ssh),
    }


def _ssh_options(resolved: Resolved) -> tuple[SshOptions, int, Origin | None]:
    opts, rank, origin = SshOptions(), -1, None
    for name in _SSH_ARG_VARS:
        value = resolved.values.get(name)
        if value in (None, ""):
            continue
        text = " ".join(map(str, value)) if isinstance(value, list) else str(value)
        opts = opts.merge(parse_ssh_args(text, resolved.origins[name]))
        rank = max(rank, resolved.rank[name])
        origin = origin or resolved.origins[name]
    return opts, rank, origin


def _proxy(resolved: Resolved, ssh: SshOptions, ssh_rank: int) -> tuple[str | None, str | None, str | None]:
    native = pick(resolved, ("jump",))
    if native is not None and native.rank >= ssh_rank:
        value = native.value
        if isinstance(value, list):
            value = ",".join(map(str, value))
        text = str(value).strip() if value is not None else ""
        return (None if text.lower() in ("", "none") else text), None, None
    return ssh.jump, ssh.proxy_command, ssh.jump_key_file


def _port(host: str, picked: Picked | None, ssh_port: str | None, ssh_origin: Origin | None) -> int:
    if picked is None and ssh_port is None:
        return 22
    value, origin, what = (
        (picked.value, picked.origin, picked.name) if picked else (ssh_port, ssh_origin, "ssh port option")
    )
    text = str(value).strip()
    if isinstance(value, bool) or not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= 65535:
        raise usage_error(
            origin or Origin("<inventory>"),
            f"host {host!r}: {what} {value!r} is not a port number (1-65535)",
            f"set {what} for {host} to a number such as 22",
        )
    return int(text)


def _bool(host: str, picked: Picked | None) -> bool:
    if picked is None or picked.value is None:
        return False
    value = picked.value
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if not isinstance(value, float) and text in _TRUE | _FALSE:
        return text in _TRUE
    raise usage_error(
        picked.origin,
        f"host {host!r}: {picked.name} must be true or false, got {value!r}",
        f"set {picked.name}: true (or false)",
    )


def _accept_new_keys(host: str, resolved: Resolved, ssh: SshOptions) -> bool:
    """Trust unknown host keys on first use when the inventory turns host key checking off the Ansible way
    (`-o StrictHostKeyChecking=no|accept-new`, `ansible_host_key_checking: false`). A changed key is still refused."""
    checking = pick(resolved, ("host_key_checking", "ansible_host_key_checking"))
    if checking is not None and _bool(host, checking) is False:
        return True
    return ssh.strict_host_keys in ("no", "off", "accept-new")


def _is_local(host: str, address: str | None, connection: Picked | None, port: object) -> bool:
    """localhost runs locally unless told otherwise; a port given for it means an SSH server there (a tunnel, a
    forwarded VM), never this machine's own shell."""
    if connection is not None and connection.value not in (None, ""):
        return str(connection.value).strip().lower() == "local"
    return host in LOCAL_NAMES and (address is None or address in LOCAL_NAMES) and not port


def _text(picked: Picked | None) -> str | None:
    if picked is None or picked.value is None:
        return None
    return str(picked.value)


def _path(value: str | None) -> str | None:
    return os.path.expanduser(value) if value else None
