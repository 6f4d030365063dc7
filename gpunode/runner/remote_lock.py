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


def owner_label() -> str:
    """Who holds the lock: user@controller, pid and start time."""
    return f"{getpass.getuser()}@{socket.gethostname()} pid {os.getpid()} since {time.strftime('%Y-%m-%d %H:%M:%S')}"


class RunLock:
    """The held lock; `facts` is what the same exec gathered."""

    def __init__(self, process: RemoteProcess, facts: Facts) -> None:
        self.process = process
        self.facts = facts

    def release(self) -> None:
        self.process.close()


def acquire(conn: Connection, timeout: float = 120.0) -> RunLock:
    """Take the lock and gather facts in one exec; refuse if another run holds the lock."""
    process = conn.start("bash -s", stdin=_script(owner_label()), label="lock + facts (facts.sh)")
    output = process.read_until(FACTS_END, timeout)
    if output.startswith(LOCKED):
        process.close()
        holder = output[len(LOCKED):].strip() or "unknown"
        raise GpunodeError(
            f"another gpunode run holds this host's lock ({holder})",
            fix="wait for that run to finish; the lock is released automatically when it ends or disconnects",
            host=conn.name, step="lock",
        )
    try:
        facts = parse_facts(output)
    except ValueError as exc:
        process.close()
        raise GpunodeError(f"could not gather facts: {exc}", host=conn.name, step="facts",
                           fix="check that bash and coreutils exist on the host; see the host log") from None
    return RunLock(process, facts)
