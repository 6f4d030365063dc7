"""What every connection (SSH or local) offers the rest of gpunode."""

from __future__ import annotations

import secrets
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gpunode.connection.quoting import join, q
from gpunode.connection.transcript import Transcript
from gpunode.errors import ConnectError, GpunodeError

BOOT_MARKER_COMMAND = "cat /proc/sys/kernel/random/boot_id; cut -d' ' -f22 /proc/1/stat"
OutputCallback = Callable[[str], None]


@dataclass
class ConnectOptions:
    """How to connect: host-key policy, timeouts, retries, and where logs go."""

    accept_new_host_keys: bool = False
    connect_timeout: float = 10.0
    retries: int = 3
    backoff: float = 1.0
    log_dir: Path | None = None


@dataclass
class ExecResult:
    """The outcome of one remote command."""

    exit_code: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def tail(self, lines: int = 12) -> str:
        """The last lines of stderr (or stdout), for error messages."""
        text = self.stderr.strip() or self.stdout.strip()
        return "\n".join(text.splitlines()[-lines:])


class RemoteProcess(ABC):
    """A long-running remote command with an open stdin (e.g. the run lock holder)."""

    buffer: str = ""
    found: bool = False  # whether the last read_until saw its marker

    def read_until(self, marker: str, timeout: float) -> str:
        """Output up to `marker` (consumed); everything so far if the process ends first."""
        deadline = time.monotonic() + timeout
        while marker not in self.buffer:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {marker!r} within {timeout:.0f}s")
            chunk = self._recv(0.2)
            if chunk == b"":
                break
            if chunk:
                self.buffer += chunk.decode(errors="replace")
        self.found = marker in self.buffer
        text, _, self.buffer = self.buffer.partition(marker)
        return text

    @abstractmethod
    def _recv(self, wait: float) -> bytes | None:
        """Output that arrived within `wait` seconds: None when none did, b"" once the output has ended."""

    def error_output(self, wait: float = 1.0) -> str:
        """What the command wrote to stderr so far (e.g. sudo's refusal), read without blocking past `wait`."""
        return ""

    @abstractmethod
    def send(self, data: bytes) -> None:
        """More input for the process."""

    @abstractmethod
    def end_input(self) -> None:
        """Close the process's input (it sees end of file); it may keep running."""

    @abstractmethod
    def close(self, wait: float = 5.0) -> int | None:
        """End our side; wait up to `wait` seconds for the exit status."""


class Connection(ABC):
    """One host. `run` executes a command (as root when `become`), counted in the transcript."""

    def __init__(self, name: str, become: bool, become_password: str | None, is_root: bool,
                 transcript: Transcript) -> None:
        self.name = name
        self.become = become
        self.become_password = become_password
        self.is_root = is_root
        self.transcript = transcript
        self.activity = ""  # the step being run: recorded on the host next to each command (guard.py)
        self.sensitive = False  # a `sensitive: true` step runs: its output is neither logged nor shown
        nonce = secrets.token_hex(6)
        self.sudo_prompt = f"@@gpunode-sudo-prompt-{nonce}@@"  # sudo prints it only when it wants the password
        self.started_marker = f"@@gpunode-started-{nonce}"  # printed once sudo let the command start
        transcript.redact.add(become_password)

    # ---- to implement --------------------------------------------------------------------------
    @abstractmethod
    def open(self) -> None: ...

    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def _exec(self, command: str, stdin: bytes, password: str | None, timeout: float | None,
              on_output: OutputCallback | None) -> tuple[int, str, str]:
        """Run `command`; `password` goes to sudo only if it prints `sudo_prompt` (before `started_marker`)."""

    @abstractmethod
    def _start(self, command: str, stdin: bytes, password: str | None) -> RemoteProcess: ...

    @abstractmethod
    def interrupt(self) -> None:
        """End the commands in flight (their remote processes stop with their channels); keep the connection."""

    def guard(self, command: str, stdin_bytes: int) -> tuple[str, bytes]:
        """`command` as it runs on the host (SSH: in its own session that dies with its channel, guard.py), and
        bytes to send before its input. A sensitive step's command travels on stdin here too (off `ps`)."""
        if self.sensitive:
            body = command.encode()
            return join(["sh", "-c", 'c=$(head -c "$1"); eval "$c"', "gpunode-hidden", str(len(body))]), body
        return command, b""

    # ---- shared --------------------------------------------------------------------------------
    def wrap(self, command: str, sudo: bool | None) -> tuple[str, str | None]:
        """The command as sent, and the become password to give sudo if (and only if) it asks for it."""
        as_root = self.become if sudo is None else sudo
        if not as_root or self.is_root:
            return command, None
        if self.become_password:
            announce = f"echo {self.started_marker} >&2; exec sh -c \"$1\""
            return (f"sudo -S -p {q(self.sudo_prompt)} -H -- sh -c {q(announce)} gpunode-sudo {q(command)}",
                    self.become_password)
        return f"sudo -n -H -- sh -c {q(command)}", None

    def run(self, command: str, *, sudo: bool | None = None, stdin: str | bytes = b"",
            timeout: float | None = None, label: str | None = None,
            on_output: OutputCallback | None = None) -> ExecResult:
        """Run one command; never raises for a non-zero exit (look at .ok), raises ConnectError when cut off."""
        data = stdin.encode() if isinstance(stdin, str) else stdin
        guarded, prefix = self.guard(command, len(data))
        wrapped, password = self.wrap(guarded, sudo)
        data = prefix + data
        started = time.monotonic()
        self.transcript.begin(label or command)
        sensitive = self.sensitive

        def each_line(line: str) -> None:  # the log and the caller get output lines as they arrive
            if sensitive:
                return
            self.transcript.stream(line)
            if on_output:
                on_output(line)

        try:
            code, out, err = self._exec(wrapped, data, password, timeout, each_line)
        except Exception as exc:  # timed out, cut off: the session was opened all the same, and may still run there
            self.transcript.record(label or command, None, time.monotonic() - started, "", f"{exc}\n",
                                   streamed=not sensitive, activity=self.activity)
            raise
        seconds = time.monotonic() - started
        err = _strip_sudo_noise(err.replace(self.sudo_prompt, ""), self.started_marker)
        hidden = "(output hidden: sensitive step)\n"
        self.transcript.record(label or command, code, seconds, hidden if sensitive and out else out,
                               hidden if sensitive and err else err, streamed=not sensitive, activity=self.activity)
        if code == 1 and "sudo: a password is required" in err:
            raise GpunodeError(
                "sudo needs a password on this host",
                fix="give become_password (ansible_become_password) in the inventory or vault, or allow "
                "passwordless sudo for this user",
                host=self.name,
            )
        return ExecResult(code, out, err, seconds)

    def start(self, command: str, *, sudo: bool | None = None, stdin: str = "",
              label: str | None = None) -> RemoteProcess:
        """Start a long-running command; `stdin` is sent and the stream stays open until the process is closed."""
        wrapped, password = self.wrap(command, sudo)
        self.transcript.note(f"$ {label or command}  (started; stays open)")
        return self._start(wrapped, stdin.encode(), password)

    def boot_marker(self) -> str:
        """Kernel boot id plus PID 1's start time: changes on every reboot, containers included."""
        result = self.run(BOOT_MARKER_COMMAND, sudo=False, label="boot marker")
        return ":".join(result.stdout.split())

    def wait_for_reboot(self, old_marker: str, timeout: float = 600.0) -> str:
        """Reconnect after a reboot; the boot marker must change. Returns the new marker."""
        self.close()
        deadline = time.monotonic() + timeout
        delay = 1.0
        last_error = "no answer"
        while time.monotonic() < deadline:
            time.sleep(delay)
            try:
                self.open()
                marker = self.boot_marker()
                if marker and marker != old_marker:
                    return marker
                last_error = "the host answered but has not rebooted yet (same boot id)"
                self.close()
            except (ConnectError, OSError) as exc:
                last_error = str(exc).splitlines()[0]
            delay = min(delay * 1.5, 10.0)
        raise ConnectError(
            f"the host did not come back from the reboot within {timeout:.0f}s (last: {last_error})",
            fix="check the instance console (a kernel panic, a hung fstab mount or a failed driver load at boot"
            " are the usual causes), then run again",
            host=self.name,
            step="reboot",
        )


def _strip_sudo_noise(text: str, marker: str) -> str:
    noise = ("sudo: unable to resolve host", marker)
    return "\n".join(line for line in text.splitlines() if not line.startswith(noise)) + (
        "\n" if text.endswith("\n") else ""
    )
