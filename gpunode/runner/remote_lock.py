"""One remote exec that takes the host's run lock, gathers facts, runs the probes, and holds the lock until we let go.

While it holds the lock the session is a small command loop: the controller sends a probe script
(`@@gpunode-run NONCE LENGTH` then exactly LENGTH bytes) and the holder runs it and answers with its output and
`@@gpunode-ran NONCE STATUS`. So a converged host costs one remote command in all: lock, facts and probe travel in
the same session, and the apply phase opens sessions only when something must change.

The lock is a flock(1) held by that exec's shell. The run's commands are recorded in the guard folder next to
the lock (`gpunode/connection/guard.py`). The holder lets go when the controller closes its input (the run
ended, or the connection dropped) or when the controller's heartbeat stops (a network cut). Before letting go
it stops every command of the run that still runs, except package transactions: for those it keeps the lock
until they end. A new run is refused while the lock is held or while a recorded command still runs (even if
its holder died), and the refusal names the step, the command and since when.
"""

from __future__ import annotations

import contextlib
import functools
import getpass
import os
import re
import secrets
import socket
import threading
import time
from collections.abc import Callable

from gpunode.connection import Connection, ExecResult, RemoteProcess, q
from gpunode.connection.guard import FUNCTIONS
from gpunode.connection.ssh import DEAD_PEER_SECONDS, KEEPALIVE_SECONDS
from gpunode.errors import ConnectError, GpunodeError
from gpunode.facts import Facts, attach_loader, facts_subshell, parse_facts

FACTS_END = "@@gpunode-facts-end"
RUN = "@@gpunode-run"
RAN = "@@gpunode-ran"
LOCKED = "GPUNODE_LOCKED"
RUNNING = "GPUNODE_RUNNING"
WAITING = "@@gpunode-waiting"
ENDED = "ended; its package transaction still runs"  # what the owner file says once the run has let go
HEARTBEAT_TIMEOUT = max(DEAD_PEER_SECONDS, 10)  # the holder lets go after this long without a heartbeat

# Bash: list the guard records whose command still runs (stale ones are removed), one per line.
_LIVE = f"""_gn_live() {{ for _f in "$gd"/[0-9]*; do [ -f "$_f" ] || continue; _p=${{_f##*/}}
  if _gn_alive "$_p"; then printf '{RUNNING} %s\\t%s\\n' "$_p" "$(cat "$_f" 2>/dev/null)"
  else rm -f "$_f" 2>/dev/null; fi; done; }}
"""


def _script(owner: str, sections: frozenset[str] | None) -> str:
    # One { } block: bash parses all of it before running any of it, so a script cut short on its way (a dropped
    # connection) is a syntax error that runs nothing (`bootstrap` hands it to bash as its -c argument).
    return "{\n" + f"""{FUNCTIONS}{_LIVE}lock="$d/gpunode.lock"
exec 9>>"$lock" || {{ echo "{LOCKED} cannot open $lock"; exit 70; }}
# -w 3: a run that has just ended may take a moment to let go
if ! flock -w 3 9; then echo "{LOCKED} $(cat "$lock.owner" 2>/dev/null)"; _gn_live; echo {FACTS_END}; exit 75; fi
live=$(_gn_live)
if [ -n "$live" ]; then echo "{LOCKED} an earlier run ended, but its commands still run"; echo "$live"
  echo {FACTS_END}; exit 75; fi
printf '%s\\n' {q(owner)} > "$lock.owner"
{facts_subshell("9>&-", sections)}echo {FACTS_END}
while IFS= read -r -t {HEARTBEAT_TIMEOUT} _l; do
  case $_l in "{RUN} "*) set -- $_l; head -c "$3" | sh -s 9>&- 2>&1; echo "{RAN} $2 $?";; esac
done
trap '' PIPE HUP INT TERM
# the run is over (let go, disconnected, or silent): stop what it left running; wait for package transactions
left=
for f in "$gd"/[0-9]*; do [ -f "$f" ] || continue; p=${{f##*/}}
  if _gn_stop "$p"; then rm -f "$f"; else left="$left $p"; fi; done
if [ -n "$left" ]; then
  printf '%s\\n' "$(cat "$lock.owner") - {ENDED}" > "$lock.owner"
  echo "{WAITING} $(_gn_live | tr '\\n' ' ')" 2>/dev/null
  for p in $left; do while _gn_alive "$p"; do sleep 1; done; rm -f "$gd/$p"; done
fi
rm -f "$lock.owner"
""" + "}\n"


@functools.cache
def this_run() -> str:
    """This controller process: user@controller and pid (the start of every lock label it writes)."""
    return f"{getpass.getuser()}@{socket.gethostname()} pid {os.getpid()}"


def owner_label(host_name: str = "") -> str:
    """Who holds the lock: user@controller, pid, start time and the inventory name it reached the host by."""
    return f"{this_run()} since {time.strftime('%Y-%m-%d %H:%M:%S')}" + (f" as {host_name}" if host_name else "")


def refusal(conn: Connection, holder: str, running: str = "") -> GpunodeError:
    """Why the lock was not taken: a lock file this user may not open, this very run, or another run (and what
    of it still runs there)."""
    if holder.startswith("cannot open"):
        return GpunodeError(
            f"{holder}: the lock file belongs to another user (an earlier run as root?), not to another run",
            fix="run with become (ansible_become: true) like the earlier runs, or remove the file on the host "
            "when no gpunode run is active",
            host=conn.name, step="lock")
    if holder.startswith(this_run() + " "):
        other = holder.rpartition(" as ")[2] if " as " in holder else "another inventory name"
        return GpunodeError(
            f"this machine is already being provisioned by this same run as {other}: two inventory names point at "
            "one machine",
            fix="remove the duplicate entry (same address and port) from the inventory, or narrow --limit",
            host=conn.name, step="lock")
    return GpunodeError(
        f"another gpunode run holds this host's lock ({holder})"
        + (f"; still running there: {running}" if running else ""),
        fix="wait for that run to finish; the lock is released automatically when it ends or disconnects "
        "(a package transaction is never killed: the lock waits for it)",
        host=conn.name, step="lock")


class RunLock:
    """The held lock; `facts` is what the same exec gathered (more sections are gathered through `run` when a
    step reads them); `run` runs a script in the same session."""

    def __init__(self, conn: Connection, process: RemoteProcess, facts: Facts, sent: str | None = None) -> None:
        self.conn = conn
        self.process = process
        self.facts = facts
        self.still_running = ""  # set by release(): a package transaction the lock now waits for
        self._sent = [sent] if sent else []          # nonces of scripts sent whose output is not read yet
        self._early: dict[str, ExecResult] = {}     # their outputs, read early because another script came first
        self._send = threading.Lock()  # a heartbeat never lands inside a script
        self._stop = threading.Event()
        self._beat = threading.Thread(target=self._heartbeat, name="lock-heartbeat", daemon=True)
        self._beat.start()
        attach_loader(facts, self._gather_facts)

    def _gather_facts(self, sections: frozenset[str]) -> str:
        result = self.run(facts_subshell(sections=sections), f"facts: {', '.join(sorted(sections))} (read by a step)")
        return result.stdout

    def _heartbeat(self) -> None:
        while not self._stop.wait(KEEPALIVE_SECONDS):
            try:
                with self._send:
                    self.process.send(b"\n")
            except Exception:  # noqa: BLE001 - a dead channel: the run notices that elsewhere
                return

    def run(self, script: str, label: str, timeout: float = 3600.0) -> ExecResult:
        """Run `script` with `sh -s` (as root when the run becomes root) in the lock's own session: no new remote
        command. stdout and stderr come back merged; the log records it like any command."""
        for sent in list(self._sent):  # the holder answers in order: read what came before this script's answer
            self._early[sent] = self.result(sent, "script sent with the lock script", timeout)
        nonce = secrets.token_hex(4)
        try:
            with self._send:
                self.process.send(run_message(nonce, script))
        except (OSError, EOFError) as exc:
            raise ConnectError(f"the run lock's session on the host is gone ({exc}): {label} could not run",
                               host=self.conn.name, fix="the host may have rebooted, lost its network or killed "
                               "gpunode's session; run again once it is back") from None
        self._sent.append(nonce)
        return self.result(nonce, label, timeout)

    def result(self, nonce: str, label: str, timeout: float = 3600.0) -> ExecResult:
        """The output of the script sent as `nonce` (by `run`, or with the lock script itself: `acquire(then=)`)."""
        if nonce in self._early:
            return self._early.pop(nonce)
        if nonce in self._sent:
            self._sent.remove(nonce)
        started = time.monotonic()
        self.conn.transcript.begin(label)
        output = self.process.read_until(f"{RAN} {nonce} ", timeout)
        if not self.process.found:
            raise ConnectError("the SSH connection was lost while the host ran the probe", host=self.conn.name,
                               fix="the host may have rebooted or lost its network; run again once it is back")
        status = self.process.read_until("\n", 10.0).strip()
        code = int(status) if status.isdigit() else -1
        seconds = time.monotonic() - started
        self.conn.transcript.record(f"{label}, inside the lock's session", code, seconds, output, "",
                                    new_session=False, activity=self.conn.activity)
        return ExecResult(code, output, "", seconds)

    def release(self, wait: float = 15.0, leftovers_possible: bool = True) -> None:
        """Let go: the holder stops the run's leftovers (or says which package transaction it now waits for).

        Without `leftovers_possible` (no command ran outside this session) there is nothing to hear back: the
        holder sees its input end, lets go on its own, and we do not wait the round trip for it."""
        self._stop.set()
        attach_loader(self.facts, None)
        if not leftovers_possible:
            with contextlib.suppress(Exception):
                self.process.end_input()
            self.process.close(wait=0)
            return
        try:
            self.process.end_input()
            self.process.read_until(WAITING, wait)
            if self.process.found:
                self.still_running = describe(self.process.read_until("\n", 5.0)) or "a package transaction"
        except (TimeoutError, OSError, EOFError, Exception):  # noqa: BLE001 - a dead channel: nothing to wait for
            pass
        self.process.close(wait=0 if self.still_running else 5.0)


def bootstrap(script: str) -> str:
    """The remote command that runs `script`, which arrives first on stdin: bash gets it whole as its `-c` argument
    (`head -c` reads exactly its bytes, in blocks), where `bash -s` would read it from the pipe a byte at a time.
    What follows it on stdin is left for the script's command loop."""
    return f'bash -c "$(head -c {len(script.encode())})" gpunode-lock'


def run_message(nonce: str, script: str) -> bytes:
    """What the holder's command loop reads: a header line, then exactly the script's bytes."""
    data = script.encode()
    return f"{RUN} {nonce} {len(data)}\n".encode() + data


def acquire(conn: Connection, timeout: float = 120.0, then: tuple[str, str] | None = None,
            sections: frozenset[str] | None = None, on_wait: Callable[[str], None] | None = None) -> RunLock:
    """Take the lock and gather facts in one exec; refuse if another run holds the lock. `then` (nonce, script): a
    script sent along with it, which the holder runs right after the facts (read it with `RunLock.result`).
    `sections`: the facts sections to gather (all when None; gpunode/facts/sections.py).

    An earlier run that has ended but left a package transaction running (apt after Ctrl-C: never killed) is
    waited for, up to GPUNODE_LEFTOVER_WAIT seconds (default 900), each wait told through `on_wait`; a run that
    is still going is refused at once."""
    deadline = time.monotonic() + _env_seconds("GPUNODE_LEFTOVER_WAIT", 900)
    while True:
        try:
            return _acquire_once(conn, timeout, then, sections)
        except _Leftover as leftover:
            if time.monotonic() > deadline:
                raise leftover.error from None
            conn.transcript.note(f"waiting: {leftover.error.cause}")
            if on_wait:
                on_wait(f"waiting for an earlier run's package transaction to end: {leftover.running or 'apt/dpkg'}")
            time.sleep(LEFTOVER_POLL)


LEFTOVER_POLL = 5.0
PACKAGE_TOOLS = re.compile(r"\b(apt|apt-get|dpkg|rpm|dnf|yum|zypper|unattended-upgr\w*)\b")  # never killed: waited for


class _Leftover(Exception):
    """The lock is held only for an ended run's package transaction: worth waiting for."""

    def __init__(self, error: GpunodeError, running: str) -> None:
        super().__init__(error.cause)
        self.error, self.running = error, running


def _env_seconds(name: str, default: int) -> float:
    text = os.environ.get(name, "")
    return float(text) if text.replace(".", "", 1).isdigit() else float(default)


def _acquire_once(conn: Connection, timeout: float, then: tuple[str, str] | None,
                  sections: frozenset[str] | None) -> RunLock:
    script = _script(owner_label(conn.name), sections)
    stdin = script + (run_message(*then).decode() if then else "")
    started = time.monotonic()
    label = "lock + facts (facts.sh); the session stays open, holding the lock, until the run lets go"
    process = conn.start(bootstrap(script), stdin=stdin, label=label)
    output = process.read_until(FACTS_END, timeout)
    conn.transcript.record(label, None, time.monotonic() - started, "", "")  # exit: none yet, it still runs
    if output.startswith(LOCKED):
        process.close()
        first, _, records = output[len(LOCKED):].partition("\n")
        holder, running = first.strip(), describe(records)
        error = refusal(conn, holder or "unknown", running)
        if holder.endswith(ENDED) or (holder.startswith("an earlier run ended") and PACKAGE_TOOLS.search(running)):
            raise _Leftover(error, running)
        raise error
    try:
        facts = parse_facts(output)
    except ValueError as exc:
        errors = process.error_output() if not output.strip() else ""
        process.close()
        if "a password is required" in errors:  # sudo -n: become without a become password
            raise sudo_needs_password(conn) from None
        raise GpunodeError(f"could not gather facts: {exc}", host=conn.name, step="facts",
                           fix="check that bash and coreutils exist on the host; see the host log") from None
    return RunLock(conn, process, facts, then[0] if then else None)


def sudo_needs_password(conn: Connection) -> GpunodeError:
    """sudo asked for a password that gpunode was not given (become without a become password)."""
    return GpunodeError("sudo on this host needs a password and none was given (become is on, this user has no "
                        "passwordless sudo)", host=conn.name, step="facts",
                        fix="give it: provision --ask-become-pass (-K) asks for it once, or set "
                        "ansible_become_password for this host in the inventory (host_vars/ or group_vars/); or "
                        "allow this user passwordless sudo (NOPASSWD), or log in as root")


def describe(records: str) -> str:
    """Guard records (`GPUNODE_RUNNING pid<TAB>since<TAB>step<TAB>command`) as one line for people."""
    parts = []
    for line in records.replace(RUNNING, "\n").splitlines():
        fields = line.strip().split("\t")
        if len(fields) < 4 or not fields[0].isdigit():
            continue
        pid, since, step, command = fields[:4]
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(int(since))) if since.isdigit() else since
        parts.append(f"step {step!r}: `{command}` since {when} (pid {pid})")
    return "; ".join(parts)
