"""A stand-in host for tests: a `Connection` that answers from scripted replies, records every exec, and never
touches a machine (Fabric's `fabric.testing`, for gpunode's connection interface).

    conn = StandinConnection("gpu1", facts=minimal_facts(), replies=[
        Reply(label="run: systemctl restart foo"),                  # exit 0, no output
        Reply(probe="guards", stdout="unless-ok\\n"),               # a probe section, by its name
        Reply(command=r"nvidia-smi", stdout="...", exit=9),         # a regex searched in the command
    ])
    outcome = HostRun(host, conn, playbook, {}, False, NoEvents(), cancel).run()
    assert not conn.unmatched and [e.label for e in conn.execs] == [...]

What the runner sends is answered as a host would: the lock + facts exec (`runner/remote_lock.py`) gets the facts
text, then every script sent into the lock's session (a probe batch, split back per section as
`steps/probe.ProbeBatch` reads it; any other script by `command`) gets its output and `@@gpunode-ran NONCE STATUS`.
Commands (`Connection.run`) are answered by the first reply whose `label` (a regex, matched whole) or `command` (a
regex, searched) matches. A command nothing answers is recorded in `unmatched` and fails its step loudly (the test
asserts `unmatched` is empty first, so it names the command). `boot marker` and `reboot` are answered here: a
reboot makes `wait_for_reboot` return at once with a new boot id (and the facts gathered after it say so).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass

from gpunode.connection import Connection, RemoteProcess, Transcript
from gpunode.connection.base import BOOT_MARKER_COMMAND, OutputCallback
from gpunode.errors import ConnectError
from gpunode.runner.remote_lock import FACTS_END, RAN, RUN

PROBE_SECTION = re.compile(r"printf '\\n%s\\n' '(@@probe-[0-9a-f]+) (\d+ [A-Za-z0-9_.-]+|end)'\n"
                           r"(?:\( (.*?)\n\) </dev/null 2>&1\n)?", re.S)


class Unmatched(AssertionError):
    """The stand-in has no reply for a command (a test that sends it must script it)."""


@dataclass
class Reply:
    """One scripted answer: for the first command whose label (regex, whole) or command text (regex, searched)
    matches, or for the probe section of that name. `interrupt`: the user presses Ctrl-C while it runs (the
    run's cancel event is set and the command ends as a closed channel does). `times`: answers that many matches,
    then is spent (None: every match)."""

    label: str | None = None
    command: str | None = None
    probe: str | None = None
    stdout: str = ""
    stderr: str = ""
    exit: int = 0
    interrupt: bool = False
    times: int | None = None

    def matches(self, label: str, command: str, section: str | None) -> bool:
        if self.times is not None and self.times <= 0:
            return False
        if section is not None:  # a probe section: by its name, or by its snippet's text
            return self.probe == section or (self.command is not None and re.search(self.command, command) is not None)
        if self.probe is not None:
            return False
        return bool((self.label is not None and re.fullmatch(self.label, label))
                    or (self.command is not None and re.search(self.command, command)))


@dataclass
class Exec:
    """One thing the runner asked of the host: `kind` is exec (a session of its own), lock (the lock + facts exec),
    script (run inside the lock's session) or reboot-wait."""

    kind: str
    label: str
    command: str
    stdin_bytes: int = 0


def minimal_facts(os_release: str, host: dict[str, str] | None = None, boot: int = 1, more: str = "") -> str:
    """facts.sh's output for a bare host: its os-release text, a `host` block (uid 0, root unless `host` says
    otherwise) and `more` blocks as facts.sh prints them (`@@kv pkgmgr\nreboot_required=1`); no `gathered` line,
    so every section counts as gathered (empty where not given)."""
    values = {"arch": "x86_64", "hostname": "standin", "uid": "0", "user": "root",
              "boot_id": f"standin-boot-{boot}", "pid1_starttime": "1", **(host or {})}
    lines = ["@@gpunode-facts 1", "@@kv host", *(f"{k}={v}" for k, v in values.items()), "@@raw file /etc/os-release",
             *(f"|{line}" for line in os_release.splitlines()), *more.splitlines(), "@@end"]
    return "\n".join(lines) + "\n"


class StandinConnection(Connection):
    """A host that answers from `replies`; `facts(boot)` is what facts.sh prints after `boot` boots (1 at first)."""

    def __init__(self, name: str, facts: Callable[[int], str], replies: list[Reply],
                 cancel: threading.Event | None = None, is_root: bool = True) -> None:
        super().__init__(name, become=False, become_password=None, is_root=is_root, transcript=Transcript(name))
        self.facts = facts
        self.replies = replies
        self.cancel = cancel or threading.Event()
        self.execs: list[Exec] = []
        self.unmatched: list[str] = []
        self.boot = 1
        self.reboot_asked = False
        self.opened = 0
        self._label = ""

    # ---- the interface ---------------------------------------------------------------------------------------
    def open(self) -> None:
        self.opened += 1

    def close(self) -> None:
        return None

    def interrupt(self) -> None:
        self.cancel.set()

    def run(self, command: str, **kwargs):  # type: ignore[no-untyped-def, override]
        self._label = kwargs.get("label") or command  # what the runner calls it (Connection.run passes no label on)
        return super().run(command, **kwargs)

    def _exec(self, command: str, stdin: bytes, password: str | None, timeout: float | None,
              on_output: OutputCallback | None) -> tuple[int, str, str]:
        label = self._label
        self.execs.append(Exec("exec", label, command, len(stdin)))
        if command == BOOT_MARKER_COMMAND:
            return 0, f"standin-boot-{self.boot}\n1\n", ""
        if label == "reboot":
            self.reboot_asked = True
            return 0, "", ""
        reply = self.answer(label, command)
        if on_output:
            for line in reply.stdout.splitlines():
                on_output(line)
        return reply.exit, reply.stdout, reply.stderr

    def _start(self, command: str, stdin: bytes, password: str | None) -> RemoteProcess:
        self.execs.append(Exec("lock", "lock + facts", command, len(stdin)))
        length = re.search(r"head -c (\d+)", command)
        if not length:
            raise Unmatched(f"the stand-in only starts the run lock's exec, not: {command[:200]}")
        holder = _LockHolder(self)
        holder.out += self.facts(self.boot) + FACTS_END + "\n"
        holder.send(stdin[int(length.group(1)):])  # what came after the script: a probe sent along with it
        return holder

    def wait_for_reboot(self, old_marker: str, timeout: float = 600.0) -> str:
        self.execs.append(Exec("reboot-wait", "wait for reboot", old_marker))
        if not self.reboot_asked:
            raise ConnectError("the stand-in was not asked to reboot", host=self.name, step="reboot")
        self.reboot_asked = False
        self.boot += 1
        return self.boot_marker()

    # ---- answering -------------------------------------------------------------------------------------------
    def answer(self, label: str, command: str, section: str | None = None) -> Reply:
        """The first reply that matches; none: recorded in `unmatched`, and the command fails loudly."""
        for reply in self.replies:
            if reply.matches(label, command, section):
                if reply.times is not None:
                    reply.times -= 1
                if reply.interrupt:
                    self.interrupt()
                    raise ConnectError("interrupted", host=self.name, fix="run again")
                return reply
        what = f"probe section {section!r}: {command}" if section else f"{label!r}: {command}"
        self.unmatched.append(what)
        raise Unmatched(f"no scripted reply for {what}")

    def run_script(self, label: str, script: str) -> tuple[str, int]:
        """A script sent into the lock's session: a probe batch (answered per section), or any other script."""
        self.execs.append(Exec("script", label, script, len(script)))
        sections = list(PROBE_SECTION.finditer(script))
        if not sections:
            reply = self.answer(label, script)
            return reply.stdout + reply.stderr, reply.exit
        out = []
        for match in sections:
            nonce, header, body = match.groups()
            out.append(f"\n{nonce} {header}\n")
            if header != "end":
                out.append(self.answer(label, body or "", section=header.partition(" ")[2]).stdout)
        return "".join(out), 0


class _LockHolder(RemoteProcess):
    """The lock's session: answers each `@@gpunode-run NONCE LENGTH` script the runner sends."""

    def __init__(self, conn: StandinConnection) -> None:
        self.conn = conn
        self.out = ""
        self._in = b""
        self.ended = False

    def _recv(self, wait: float) -> bytes | None:
        chunk, self.out = self.out, ""
        return chunk.encode() if chunk else b""  # nothing more will come: the output ended (never a wait)

    def send(self, data: bytes) -> None:
        self._in += data
        while True:
            head, newline, rest = self._in.partition(b"\n")
            if not newline:
                return
            if not head.startswith(RUN.encode()):
                self._in = rest  # a heartbeat (an empty line)
                continue
            _, nonce, length = head.decode().split()
            if len(rest) < int(length):
                return
            script, self._in = rest[:int(length)].decode(), rest[int(length):]
            try:
                output, status = self.conn.run_script(f"script {nonce}", script)
            except ConnectError:
                self.ended = True  # interrupted: the session ends without an answer
                return
            except Unmatched:
                output, status = "", 127
            self.out += f"{output}{RAN} {nonce} {status}\n"

    def end_input(self) -> None:
        self.ended = True

    def close(self, wait: float = 5.0) -> int | None:
        self.ended = True
        return 0
