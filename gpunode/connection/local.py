"""`localhost`: the same interface, run with subprocess, no SSH."""

from __future__ import annotations

import contextlib
import os
import select
import subprocess

from gpunode.connection.base import Connection, OutputCallback, RemoteProcess
from gpunode.connection.transcript import Transcript
from gpunode.errors import ConnectError
from gpunode.inventory import Host


class LocalConnection(Connection):
    """Commands run on this machine through /bin/sh."""

    def __init__(self, host: Host, transcript: Transcript) -> None:
        super().__init__(host.name, host.become, host.become_password, os.geteuid() == 0, transcript)

    def open(self) -> None:
        return None

    def close(self) -> None:
        return None

    def interrupt(self) -> None:
        return None  # local commands share our process group: the terminal's Ctrl-C reaches them too

    def _exec(self, command: str, stdin: bytes, password: str | None, timeout: float | None,
              on_output: OutputCallback | None) -> tuple[int, str, str]:
        stdin = _with_password(stdin, password)
        try:
            result = subprocess.run(["/bin/sh", "-c", command], input=stdin, capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise ConnectError(f"command timed out after {timeout:.0f}s", host=self.name,
                               fix="raise the step's timeout") from None
        out = result.stdout.decode(errors="replace")
        if on_output:
            for line in out.splitlines():
                on_output(line)
        return result.returncode, out, result.stderr.decode(errors="replace")

    def _start(self, command: str, stdin: bytes, password: str | None) -> RemoteProcess:
        stdin = _with_password(stdin, password)
        process = subprocess.Popen(["/bin/sh", "-c", command], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL)
        local = _LocalProcess(process)
        if stdin:
            local.send(stdin)
        return local


def _with_password(stdin: bytes, password: str | None) -> bytes:
    """Locally the password is fed first (sudo on this machine, run by its own user, is assumed to ask for it)."""
    return (password + "\n").encode() + stdin if password else stdin


class _LocalProcess(RemoteProcess):
    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdin is not None and process.stdout is not None  # both are pipes (_start)
        self.process = process
        self.stdin, self.stdout = process.stdin, process.stdout

    def _recv(self, wait: float) -> bytes | None:
        fd = self.stdout.fileno()
        ready, _, _ = select.select([fd], [], [], wait)
        return os.read(fd, 65536) if ready else None

    def send(self, data: bytes) -> None:
        self.stdin.write(data)
        self.stdin.flush()

    def end_input(self) -> None:
        with contextlib.suppress(OSError):
            self.stdin.close()

    def close(self, wait: float = 5.0) -> int | None:
        self.end_input()
        try:
            return self.process.wait(timeout=wait or 0.01)
        except subprocess.TimeoutExpired:
            if wait:  # wait=0: the lock holder waits for a package transaction; leave it
                self.process.kill()
            return None
