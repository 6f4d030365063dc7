"""SSH connections: Fabric sets them up (ssh_config, keys, agent, jump hosts), paramiko channels run commands."""

from __future__ import annotations

import codecs
import contextlib
import os
import select
import socket
import threading
import time

import fabric
import paramiko

from gpunode.connection.base import Connection, ConnectOptions, OutputCallback, RemoteProcess
from gpunode.connection.failures import classify, key_file_failure
from gpunode.connection.guard import guarded
from gpunode.connection.hostkeys import VerifyPolicy, changed_key_error, load_known_hosts
from gpunode.connection.transcript import Transcript
from gpunode.errors import ConnectError, GpunodeError, HostKeyError, disk_full_fix
from gpunode.inventory import Host

_READ = 65536
_SEND = 65536  # more than an SSH packet's payload (32 KiB): send() takes what fits


def _env_seconds(name: str, default: int) -> int:
    """A positive number of seconds from the environment (tests shorten timeouts this way), else the default."""
    value = os.environ.get(name, "")
    return int(value) if value.isdigit() and int(value) > 0 else default


DEAD_PEER_SECONDS = _env_seconds("GPUNODE_DEAD_PEER_SECONDS", 60)  # data unacknowledged this long = host gone
KEEPALIVE_SECONDS = min(15, max(1, DEAD_PEER_SECONDS // 4))  # keepalives are the data that detects a silent cut



_config_lock = threading.Lock()
_config: fabric.Config | None = None


def _shared_config() -> fabric.Config:
    """One Fabric config for every connection of the process: Fabric reads ~/.ssh/config and its own config files
    when a config is made, and nothing a connection does writes to it."""
    global _config  # noqa: PLW0603 - made once, on first use, by whichever host thread comes first
    with _config_lock:
        if _config is None:
            _config = fabric.Config()
        return _config

class SshConnection(Connection):
    """A host reached over SSH (optionally through a bastion)."""

    def __init__(self, host: Host, options: ConnectOptions, transcript: Transcript) -> None:
        super().__init__(host.name, host.become, host.become_password, host.user == "root", transcript)
        self.host = host
        self.options = options
        transcript.redact.add(host.password)
        self._fabric: fabric.Connection | None = None
        self._active: set[paramiko.Channel] = set()  # commands in flight, for interrupt()
        self._active_lock = threading.Lock()
        self._interrupted = False

    # ---- setup ---------------------------------------------------------------------------------
    def _build(self) -> fabric.Connection:
        config = _shared_config()
        host = self.host
        connect_kwargs: dict = {
            "banner_timeout": self.options.connect_timeout,
            "auth_timeout": self.options.connect_timeout,
        }
        if host.key_file:
            connect_kwargs["key_filename"] = [host.key_file]
        if host.password:
            connect_kwargs["password"] = host.password
        gateway: fabric.Connection | str | None = host.proxy_command
        if host.jump:
            gateway = None
            for hop in host.jump.split(","):  # a chain: each hop reached through the previous one
                gateway = self._secured(fabric.Connection(hop.strip(), gateway=gateway, config=config,
                                                          connect_timeout=self.options.connect_timeout,
                                                          connect_kwargs=dict(connect_kwargs)))
        conn = fabric.Connection(
            host.address, user=host.user, port=host.port, gateway=gateway, config=config,
            connect_timeout=self.options.connect_timeout, connect_kwargs=connect_kwargs,
        )
        return self._secured(conn)

    def _secured(self, conn: fabric.Connection) -> fabric.Connection:
        """Replace Fabric's default auto-add policy with verification against known_hosts."""
        load_known_hosts(conn.client, [self.host.known_hosts] if self.host.known_hosts else [])
        accept_new = self.options.accept_new_host_keys or self.host.accept_new_host_keys  # inventory: Strict...=no
        conn.client.set_missing_host_key_policy(VerifyPolicy(accept_new, self.name))
        return conn

    def open(self) -> None:
        """Connect, retrying transient network errors with backoff; key and auth problems fail at once."""
        if self._fabric and self._fabric.is_connected:
            return
        problem = key_file_failure(self.host.key_file)
        if problem:
            raise ConnectError(problem.cause, fix=problem.fix, host=self.name, step="connect")
        delay = self.options.backoff
        for attempt in range(1, self.options.retries + 1):
            self._fabric = self._build()
            try:
                self._fabric.open()
                transport = self._fabric.client.get_transport()
                transport.set_keepalive(KEEPALIVE_SECONDS)
                _detect_dead_peer(transport.sock)
                self.is_root = self.is_root or self._fabric.user == "root"
                return
            except paramiko.BadHostKeyException as exc:
                raise changed_key_error(self.name, exc) from None
            except HostKeyError:
                raise
            except paramiko.AuthenticationException as exc:
                if "saw EOF" in str(exc) and attempt < self.options.retries:
                    # sshd hung up during authentication (overloaded, MaxStartups, LoginGraceTime): the key was
                    # never refused, so this is transient, like a dropped connection
                    time.sleep(delay)
                    delay *= 2
                    continue
                raise ConnectError(
                    f"authentication failed as {self._fabric.user}@{self.host.address}: {exc}",
                    fix="check the user and the key (ansible_user, ansible_ssh_private_key_file) or load the key "
                    "into ssh-agent",
                    host=self.name, step="connect",
                ) from None
            except (OSError, paramiko.SSHException, EOFError) as exc:
                failure = classify(exc, self.host.address, self.host.port, self.options.connect_timeout)
                if not failure.retry or attempt == self.options.retries:
                    tries = f" (after {attempt} attempts)" if attempt > 1 else ""
                    raise ConnectError(failure.cause + tries, fix=failure.fix, host=self.name,
                                       step="connect") from None
                time.sleep(delay)
                delay *= 2

    def close(self) -> None:
        if self._fabric:
            with contextlib.suppress(Exception):  # closing a dead connection must not mask the real error
                self._fabric.close()
            self._fabric = None

    def _channel(self) -> paramiko.Channel:
        self.open()
        assert self._fabric is not None
        transport = self._fabric.client.get_transport()
        if transport is None or not transport.is_active():
            self.close()
            self.open()
            transport = self._fabric.client.get_transport()
        try:
            return transport.open_session(timeout=self.options.connect_timeout)
        except (paramiko.SSHException, OSError, EOFError) as exc:
            self.close()
            raise ConnectError(f"the SSH connection was lost: {exc}", fix="check the host and run again",
                               host=self.name) from None

    # ---- execution -----------------------------------------------------------------------------
    def guard(self, command: str, stdin_bytes: int) -> tuple[str, bytes]:
        return guarded(command, stdin_bytes, self.activity, self.sensitive)

    def interrupt(self) -> None:
        with self._active_lock:
            self._interrupted = True  # commands not yet started never start
            channels = list(self._active)
        for channel in channels:
            with contextlib.suppress(Exception):
                channel.close()

    def _exec(self, command: str, stdin: bytes, password: str | None, timeout: float | None,
              on_output: OutputCallback | None) -> tuple[int, str, str]:
        channel = self._channel()
        with self._active_lock:
            if self._interrupted:
                channel.close()
                raise ConnectError("interrupted", host=self.name, fix="run again")
            self._active.add(channel)
        try:
            channel.exec_command(command)
            out, err = self._handshake(channel, password) if password else (bytearray(), bytearray())
            if stdin:
                _send_input(channel, stdin)
            # The input stays open until the command ends: its end tells the remote guard the channel closed.
            return _collect(channel, timeout, on_output, self.name, out, err)
        except (OSError, EOFError, paramiko.SSHException) as exc:
            self.close()
            raise ConnectError(f"the SSH connection broke during a command: {exc or type(exc).__name__}",
                               fix="the host may have rebooted or lost its network; run again once it is back",
                               host=self.name) from None
        finally:
            with self._active_lock:
                self._active.discard(channel)
            channel.close()

    def _start(self, command: str, stdin: bytes, password: str | None) -> RemoteProcess:
        channel = self._channel()
        channel.exec_command(command)
        if password:
            self._handshake(channel, password)
        if stdin:
            send_all(channel, stdin)
        return _SshProcess(channel)

    def _handshake(self, channel: paramiko.Channel, password: str) -> tuple[bytearray, bytearray]:
        """Give sudo the password only if it prompts for it; return once the command started (output so far)."""
        out, err = bytearray(), bytearray()
        prompt, started = self.sudo_prompt.encode(), self.started_marker.encode()
        answered = False
        deadline = time.monotonic() + max(30.0, self.options.connect_timeout * 3)
        while started not in err:
            while channel.recv_ready():
                out += channel.recv(_READ)
            while channel.recv_stderr_ready():
                err += channel.recv_stderr(_READ)
            if prompt in err:
                if answered:
                    raise GpunodeError("sudo rejected the become password", host=self.name,
                                       fix="check become_password (ansible_become_password) for this host")
                err = err.replace(prompt, b"", 1)
                channel.sendall((password + "\n").encode())
                answered = True
                continue
            if channel.exit_status_ready() and not channel.recv_ready() and not channel.recv_stderr_ready():
                return out, err  # sudo refused before starting anything: its message is in err
            if time.monotonic() > deadline:
                raise ConnectError("sudo did not start the command within 30 s", host=self.name,
                                   fix="check sudo on the host (sudo -v as this user)")
            select.select([channel], [], [], 0.2)
        return out, err


def _detect_dead_peer(sock: object) -> None:
    """Let the kernel drop the connection when the host vanishes (network cut, crash) instead of hanging."""
    if isinstance(sock, socket.socket) and hasattr(socket, "TCP_USER_TIMEOUT"):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, DEAD_PEER_SECONDS * 1000)


def _send_input(channel: paramiko.Channel, data: bytes) -> None:
    """Send a command's input; a command that ended before reading all of it (`cat > file` on a full disk) is not a
    broken connection: the rest is dropped and its own exit status and stderr, collected next, say why."""
    try:
        send_all(channel, data)
    except (OSError, EOFError, paramiko.SSHException):
        if _connection_lost(channel):
            raise


def send_all(channel: paramiko.Channel, data: bytes) -> None:
    """channel.sendall(data) in time linear in its size: paramiko's sendall keeps `s = s[sent:]`, a copy of all
    that is left after every packet of at most 32 KiB (quadratic: 5 to 10 s of controller CPU for the module cache's
    44 MB package sent to each host). Here only a packet's slice is copied."""
    offset = 0
    while offset < len(data):
        sent = channel.send(data[offset:offset + _SEND])
        if sent <= 0:
            raise EOFError("the channel closed before its input was sent")
        offset += sent


class _Lines:
    """Output bytes to whole lines for on_output, in time linear in the output: a chunk without a newline is only
    kept (re-splitting everything pending at each chunk made one long line quadratic: the module cache's package,
    ~57 MB of base64 on one line, cost the controller 25 to 45 s of CPU), and a UTF-8 character cut between two
    chunks is decoded whole."""

    def __init__(self, on_output: OutputCallback) -> None:
        self.on_output = on_output
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.pending: list[str] = []

    def feed(self, chunk: bytes, final: bool = False) -> None:
        text = self.decoder.decode(chunk, final)
        if "\n" not in text:
            if text:
                self.pending.append(text)
            return
        first, *rest = text.split("\n")
        self.on_output("".join([*self.pending, first]))
        *whole, tail = rest
        for line in whole:
            self.on_output(line)
        self.pending = [tail] if tail else []

    def close(self) -> None:
        """The last line when the output did not end with a newline."""
        self.feed(b"", final=True)
        if self.pending:
            self.on_output("".join(self.pending))
            self.pending = []


def _collect(channel: paramiko.Channel, timeout: float | None, on_output: OutputCallback | None,
             name: str, out: bytearray, err: bytearray) -> tuple[int, str, str]:
    deadline = time.monotonic() + timeout if timeout else None
    lines = _Lines(on_output) if on_output else None
    while True:
        got = False
        while channel.recv_ready():
            chunk = channel.recv(_READ)
            out += chunk
            got = True
            if lines:
                lines.feed(chunk)
        while channel.recv_stderr_ready():
            err += channel.recv_stderr(_READ)
            got = True
        if channel.exit_status_ready() and not channel.recv_ready() and not channel.recv_stderr_ready():
            break
        if channel.closed and not got:
            break
        if deadline and time.monotonic() > deadline:
            raise ConnectError(f"command timed out after {timeout:.0f}s", host=name,
                               fix="raise the step's timeout, or look at the host's log for where it hung")
        if not got:
            select.select([channel], [], [], 0.5)
    if lines:
        lines.close()
    code = channel.recv_exit_status() if channel.exit_status_ready() else -1
    if code == -1 and _connection_lost(channel):  # closed under us: not the command's own failure
        raise _lost_during(name, err)
    return code, out.decode(errors="replace"), err.decode(errors="replace")


def _lost_during(name: str, err: bytearray) -> ConnectError:
    """The connection lost while a command ran, with the host's last stderr (a full disk is named as such)."""
    said = err.decode(errors="replace").strip().splitlines()[-5:]
    last = "; the host's last stderr:\n" + "\n".join(said) if said else ""
    return ConnectError(f"the SSH connection was lost while the command ran (no exit status came back){last}",
                        fix=disk_full_fix("\n".join(said)) or "the host may have rebooted, lost its network or had "
                        "sshd killed; run again once it is back (steps are idempotent)", host=name)


def _connection_lost(channel: paramiko.Channel) -> bool:
    """The transport died (cut, reset, sshd killed), as opposed to a command killed by a signal."""
    transport = channel.get_transport()
    return transport is None or not transport.is_active() or transport.saved_exception is not None


class _SshProcess(RemoteProcess):
    def __init__(self, channel: paramiko.Channel) -> None:
        self.channel = channel

    def _recv(self, wait: float) -> bytes | None:
        if self.channel.recv_ready():
            return self.channel.recv(_READ)
        if self.channel.exit_status_ready():
            return b""
        select.select([self.channel], [], [], wait)
        return None

    def error_output(self, wait: float = 1.0) -> str:
        err = bytearray()
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            while self.channel.recv_stderr_ready():
                err += self.channel.recv_stderr(_READ)
            if self.channel.exit_status_ready() and not self.channel.recv_stderr_ready():
                break
            select.select([self.channel], [], [], 0.05)
        return err.decode(errors="replace")

    def send(self, data: bytes) -> None:
        send_all(self.channel, data)

    def end_input(self) -> None:
        self.channel.shutdown_write()

    def close(self, wait: float = 5.0) -> int | None:
        try:
            self.channel.shutdown_write()
            deadline = time.monotonic() + wait
            while not self.channel.exit_status_ready() and time.monotonic() < deadline:
                time.sleep(0.02)
            return self.channel.recv_exit_status() if self.channel.exit_status_ready() else None
        except (OSError, EOFError, paramiko.SSHException):
            return None
        finally:
            self.channel.close()
