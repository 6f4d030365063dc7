"""What scripts/nfs_mount.sh `probe` saw on a host, parsed into one object."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpunode.steps.nfs.fstab import unescape


@dataclass(frozen=True)
class LiveMount:
    """One line of /proc/self/mounts on the mount point."""

    source: str
    fstype: str
    options: str


@dataclass
class NfsState:
    """Preflight results (None when not probed) and the mount point's state."""

    addresses: list[str] | None = None      # None: not checked; []: the name did not resolve
    ports: dict[int, str] = field(default_factory=dict)    # port -> "open" | "refused" | "timeout" | ...
    port_details: dict[int, str] = field(default_factory=dict)
    showmount: str | None = None             # None | "absent" | "ok" | "fail"
    showmount_error: str = ""
    exports: list[tuple[str, str]] = field(default_factory=list)   # (path, clients)
    kernel: str = ""                         # "builtin" | "module" | "none"
    kernel_release: str = ""
    mounts: list[LiveMount] = field(default_factory=list)
    users: list[tuple[int, str]] = field(default_factory=list)
    server_addresses: list[str] = field(default_factory=list)
    connections: list[tuple[str, str]] = field(default_factory=list)  # (local, peer) TCP to port 2049
    path: str = ""                           # "dir" | "missing" | "other"
    systemd: bool = False
    findmnt: str = ""                        # "verify" | "plain" | "absent"

    @property
    def autofs(self) -> bool:
        """An automount (autofs) sits on the mount point."""
        return any(m.fstype == "autofs" for m in self.mounts)

    @property
    def share(self) -> LiveMount | None:
        """The topmost real (non-autofs) mount on the mount point."""
        real = [m for m in self.mounts if m.fstype != "autofs"]
        return real[-1] if real else None

    def users_text(self) -> str:
        return ", ".join(f"{pid} ({comm})" for pid, comm in self.users)


def parse_state(output: str) -> NfsState:
    """The probe's output, one `WORD values...` line each: preflight lines, then the mount point's."""
    state = NfsState()
    for line in output.splitlines():
        word, _, rest = line.partition(" ")
        parts = rest.split()
        if not _read_preflight(state, word, parts):
            _read_mount_point(state, word, parts)
    return state


def _read_preflight(state: NfsState, word: str, parts: list[str]) -> bool:
    """A preflight line (dns, port, showmount, export, kernel) into `state`; False when the line is another kind."""
    if word == "dns":
        state.addresses = parts[1:] if parts and parts[0] == "ok" else []
    elif word == "port" and len(parts) >= 2 and parts[0].isdigit():
        state.ports[int(parts[0])] = parts[1]
        state.port_details[int(parts[0])] = " ".join(parts[2:])
    elif word == "showmount" and parts:
        state.showmount = parts[0]
        state.showmount_error = " ".join(parts[1:])
    elif word == "export" and parts:
        state.exports.append((unescape(parts[0]), " ".join(parts[1:])))
    elif word == "kernel" and parts:
        state.kernel = parts[0]
        state.kernel_release = " ".join(parts[1:])
    else:
        return False
    return True


def _read_mount_point(state: NfsState, word: str, parts: list[str]) -> None:
    """A line about the mount point (mount, user, addr, conn, path, systemd, findmnt) into `state`; others ignored."""
    if word == "mount" and len(parts) >= 3:
        state.mounts.append(LiveMount(unescape(parts[0]), parts[1], parts[2]))
    elif word == "user" and parts and parts[0].isdigit():
        state.users.append((int(parts[0]), " ".join(parts[1:])))
    elif word == "addr" and parts:
        state.server_addresses.append(parts[0])
    elif word == "conn" and len(parts) == 2:
        state.connections.append((parts[0], parts[1]))
    elif word == "path" and parts:
        state.path = parts[0]
    elif word == "systemd" and parts:
        state.systemd = parts[0] == "yes"
    elif word == "findmnt" and parts:
        state.findmnt = parts[0]


def split_port(endpoint: str) -> tuple[str, int]:
    """'10.0.0.5:2049' or '[fe80::1]:2049' -> (address, port)."""
    host, _, port = endpoint.rpartition(":")
    return host.strip("[]"), int(port) if port.isdigit() else -1


def reserved_port_connections(state: NfsState) -> list[str]:
    """Local endpoints below 1024 of TCP connections to the server's port 2049 (noresvport not in effect)."""
    peers = set(state.server_addresses)
    found = []
    for local, peer in state.connections:
        address, _ = split_port(peer)
        if (not peers or address in peers) and 0 <= split_port(local)[1] < 1024:
            found.append(local)
    return found
