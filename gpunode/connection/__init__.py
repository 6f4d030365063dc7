"""Connections to hosts: SSH (Fabric/paramiko) or local, with transcripts, sudo and host-key checks."""

from __future__ import annotations

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
        log_path = options.log_dir / f"{host.name}.log" if options.log_dir else None
        transcript = Transcript(host.name, redactor, log_path)
    if host.local:
        return LocalConnection(host, transcript)
    return SshConnection(host, options, transcript)


__all__ = [
    "Connection", "ConnectOptions", "ExecResult", "RemoteProcess", "Transcript", "Redactor", "connect", "q", "join",
]
