"""One classification of connection failures: what went wrong, what to do, and whether retrying can help.

Only transient network failures (a refused or unanswered connection, a dropped handshake) are retried;
a missing or unreadable key file, an unknown host name or a rejected login fail at once with their own fix.
"""

from __future__ import annotations

import errno
import logging
import os
import socket
from dataclasses import dataclass

import paramiko

# paramiko's transport thread logs a failed handshake with a traceback on stderr when no logging is set up;
# the failure is classified and reported here instead (and in the host log)
logging.getLogger("paramiko").addHandler(logging.NullHandler())


@dataclass(frozen=True)
class Failure:
    """A classified connection failure."""

    kind: str        # key-file, dns, refused, timeout, unreachable, auth, network
    cause: str
    fix: str
    retry: bool


def key_file_failure(path: str | None) -> Failure | None:
    """A problem with the configured private key file, found before any network traffic."""
    if not path:
        return None
    if not os.path.exists(path):
        return Failure("key-file", f"the SSH private key file {path} does not exist",
                       "fix ansible_ssh_private_key_file (or `key`) in the inventory, or create the key", False)
    if not os.access(path, os.R_OK):
        return Failure("key-file", f"the SSH private key file {path} cannot be read by this user",
                       f"make it readable for this user (chmod 600 {path}, owned by you) or use another key", False)
    return None


def classify(exc: BaseException, address: str, port: int, timeout: float) -> Failure:
    """Name a failure to open an SSH connection to address:port."""
    where = f"{address}:{port}"
    codes = _errnos(exc)
    if isinstance(exc, socket.gaierror):
        return Failure("dns", f"the host name {address!r} does not resolve ({exc.strerror or exc})",
                       "check ansible_host (or `address`) in the inventory and this machine's DNS", False)
    if isinstance(exc, FileNotFoundError):
        return Failure("key-file", f"a file needed to connect does not exist: {exc.filename or exc}",
                       "check the key file settings (ansible_ssh_private_key_file, IdentityFile)", False)
    if isinstance(exc, paramiko.PasswordRequiredException):
        return Failure("key-file", f"the SSH private key is encrypted and no passphrase was given: {exc}",
                       "load the key into ssh-agent (ssh-add KEY) or use an unencrypted deployment key", False)
    if codes and codes <= {errno.ECONNREFUSED}:
        return Failure("refused", f"{where} refused the connection: the host is up but nothing listens on that port",
                       "check the port (ansible_port) and that sshd runs on the host (it may still be booting)",
                       True)
    if isinstance(exc, TimeoutError | socket.timeout) or errno.ETIMEDOUT in codes:
        return Failure("timeout", f"no answer from {where} within {timeout:.0f}s (connection timed out)",
                       "check that the instance is running and the address is right, and that the security group / "
                       "firewall allows SSH from here (or through the bastion): something drops the packets", True)
    if codes & {errno.EHOSTUNREACH, errno.ENETUNREACH}:
        return Failure("unreachable", f"no route to {where} (host or network unreachable)",
                       "check the address, that the instance is running, and the routes/VPN between here and it",
                       True)
    return Failure("network", f"cannot connect to {where}: {exc or type(exc).__name__}",
                   "check that the instance is running, the address and port are right, and the firewall allows "
                   "SSH from here (or through the bastion)", True)


def _errnos(exc: BaseException) -> set[int]:
    if isinstance(exc, paramiko.ssh_exception.NoValidConnectionsError):
        return {e.errno for e in exc.errors.values() if getattr(e, "errno", None)}
    code = getattr(exc, "errno", None)
    return {code} if isinstance(code, int) else set()
