"""One remote exec that takes the host's run lock, gathers facts, and holds the lock until we let go.

The lock is a flock(1) held by that exec's shell: if the controller dies or the connection drops, sshd
ends the shell and the kernel releases the lock, so no stale lock is ever left behind.
"""

from __future__ import annotations

import getpass
import os
import socket
import time

from gpunode.connection import Connection, RemoteProcess, q
from gpunode.errors import GpunodeError
from gpunode.facts import Facts, facts_subshell, parse_facts

FACTS_END = "@@gpunode-facts-end"
LOCKED = "GPUNODE_LOCKED"


def _script(owner: str) -> str:
    return f"""lock_dir=/run/lock; [ -d "$lock_dir" ] && [ -w "$lock_dir" ] || lock_dir=${{TMPDIR:-/tmp}}
lock="$lock_dir/gpunode.lock"
exec 9>>"$lock" || {{ echo "{LOCKED} cannot open $lock"; exit 70; }}
if ! flock -n 9; then echo "{LOCKED} $(cat "$lock.owner" 2>/dev/null)"; echo {FACTS_END}; exit 75; fi
printf '%s\\n' {q(owner)} > "$lock.owner"
{facts_subshell("9>&-")}echo {FACTS_END}
cat >/dev/null
rm -f "$lock.owner"
"""


def this_run() -> str:
    """This controller process: user@controller and pid (the start of every lock label it writes)."""
    return f"{getpass.getuser()}@{socket.gethostname()} pid {os.getpid()}"


def owner_label(host_name: str = "") -> str:
    """Who holds the lock: user@controller, pid, start time and the inventory name it reached the host by."""
    return f"{this_run()} since {time.strftime('%Y-%m-%d %H:%M:%S')}" + (f" as {host_name}" if host_name else "")


def refusal(conn: Connection, holder: str) -> GpunodeError:
    """Why the lock was not taken: a lock file this user may not open, this very run, or another run."""
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
        f"another gpunode run holds this host's lock ({holder})",
        fix="wait for that run to finish; the lock is released automatically when it ends or disconnects",
        host=conn.name, step="lock")


class RunLock:
    """The held lock; `facts` is what the same exec gathered."""

    def __init__(self, process: RemoteProcess, facts: Facts) -> None:
        self.process = process
        self.facts = facts

    def release(self) -> None:
        self.process.close()


def acquire(conn: Connection, timeout: float = 120.0) -> RunLock:
    """Take the lock and gather facts in one exec; refuse if another run holds the lock."""
    process = conn.start("bash -s", stdin=_script(owner_label(conn.name)), label="lock + facts (facts.sh)")
    output = process.read_until(FACTS_END, timeout)
    if output.startswith(LOCKED):
        process.close()
        raise refusal(conn, output[len(LOCKED):].strip() or "unknown")
    try:
        facts = parse_facts(output)
    except ValueError as exc:
        process.close()
        raise GpunodeError(f"could not gather facts: {exc}", host=conn.name, step="facts",
                           fix="check that bash and coreutils exist on the host; see the host log") from None
    return RunLock(process, facts)
