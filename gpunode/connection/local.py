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

    def _exec(self, command: str, stdin: bytes, timeout: float | None,
              on_output: OutputCallback | None) -> tuple[int, str, str]:
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

    def _start(self, command: str, stdin: bytes) -> RemoteProcess:
        process = subprocess.Popen(["/bin/sh", "-c", command], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL)
        if stdin:
            process.stdin.write(stdin)
            process.stdin.flush()
        return _LocalProcess(process)


class _LocalProcess(RemoteProcess):
    def __init__(self, process: subprocess.Popen) -> None:
        self.process = process

    def _recv(self, wait: float) -> bytes | None:
        fd = self.process.stdout.fileno()
        ready, _, _ = select.select([fd], [], [], wait)
        return os.read(fd, 65536) if ready else None

    def close(self) -> int | None:
        with contextlib.suppress(OSError):
            self.process.stdin.close()
        try:
            return self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return None
