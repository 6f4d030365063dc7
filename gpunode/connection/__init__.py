"""Connections to hosts: SSH (Fabric/paramiko) or local, with transcripts, sudo and host-key checks."""

from __future__ import annotations

import hashlib
import re

from gpunode.connection.base import Connection, ConnectOptions, ExecResult, RemoteProcess
from gpunode.connection.quoting import join, q
from gpunode.connection.redact import Redactor
from gpunode.connection.transcript import Transcript
from gpunode.inventory import Host


def connect(host: Host, options: ConnectOptions, transcript: Transcript | None = None) -> Connection:
    """A connection for the host (not yet opened): local for localhost, SSH otherwise."""
    from gpunode.connection.local import LocalConnection
    from gpunode.connection.ssh import SshConnection

    if transcript is None:
        redactor = Redactor([host.password, host.become_password])
        redactor.add_from_vars(host.vars)
        log_path = options.log_dir / log_file_name(host.name) if options.log_dir else None
        transcript = Transcript(host.name, redactor, log_path)
    if host.local:
        return LocalConnection(host, transcript)
    return SshConnection(host, options, transcript)


def log_file_name(host_name: str) -> str:
    """`<host>.log`, or a safe name when the host's name is no plain file name (`../x`, `a/b`): logs stay put."""
    safe = re.sub(r"[^A-Za-z0-9._@+:-]", "_", host_name).lstrip(".")
    if safe == host_name:
        return f"{safe}.log"
    return f"{safe or 'host'}-{hashlib.sha256(host_name.encode()).hexdigest()[:8]}.log"


__all__ = [
    "Connection", "ConnectOptions", "ExecResult", "RemoteProcess", "Transcript", "Redactor", "connect", "q", "join",
]
