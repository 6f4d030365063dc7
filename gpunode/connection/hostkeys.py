"""Host keys: verified against known_hosts by default; trust on first use only when asked."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import paramiko

from gpunode.errors import HostKeyError

_write_lock = threading.Lock()


def gpunode_known_hosts() -> Path:
    """gpunode's own known_hosts file, where --accept-new-host-keys records keys."""
    base = os.environ.get("GPUNODE_KNOWN_HOSTS")
    if base:
        return Path(base)
    config = Path(os.environ.get("XDG_CONFIG_HOME", Path.home() / ".config"))
    return config / "gpunode" / "known_hosts"


def fingerprint(key: paramiko.PKey) -> str:
    """`ssh-ed25519 SHA256:...`, as ssh prints it."""
    return f"{key.get_name()} {key.fingerprint}"


def load_known_hosts(client: paramiko.SSHClient, extra: list[str | Path]) -> None:
    """Load ~/.ssh/known_hosts, gpunode's own file and per-host files into the client."""
    client.load_system_host_keys()
    for path in [gpunode_known_hosts(), *extra]:
        path = Path(path).expanduser()
        if path.is_file():
            client.get_host_keys().load(str(path))


class VerifyPolicy(paramiko.MissingHostKeyPolicy):
    """Refuse unknown keys, or record them in gpunode's known_hosts when `accept_new` is set."""

    def __init__(self, accept_new: bool, host_name: str) -> None:
        self.accept_new = accept_new
        self.host_name = host_name

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        if not self.accept_new:
            raise HostKeyError(
                f"unknown SSH host key for {hostname} ({fingerprint(key)})",
                fix="check the fingerprint with the machine's console or cloud API, then add it to "
                "~/.ssh/known_hosts (ssh-keyscan), or run once with --accept-new-host-keys to trust it on first use",
                host=self.host_name,
                step="connect",
            )
        path = gpunode_known_hosts()
        with _write_lock:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a", encoding="utf-8") as handle:
                handle.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")
        client.get_host_keys().add(hostname, key.get_name(), key)


def changed_key_error(host_name: str, exc: paramiko.BadHostKeyException) -> HostKeyError:
    return HostKeyError(
        f"SSH host key CHANGED for {exc.hostname}: known {fingerprint(exc.expected_key)}, "
        f"offered {fingerprint(exc.key)}. Refusing to connect (possible man-in-the-middle).",
        fix=f"if the machine was rebuilt, remove the old key: ssh-keygen -R {exc.hostname} (and from "
        f"{gpunode_known_hosts()} or the inventory's known_hosts file), then connect again",
        host=host_name,
        step="connect",
    )
