"""Rules a host's run applies around each step: what --check records, who may change what, and the commands
the report lists."""

from __future__ import annotations

from gpunode.connection import Connection
from gpunode.facts import Facts
from gpunode.report.model import HostOutcome
from gpunode.steps import Action, Step, StepContext, StepFailed


def account_commands(outcome: HostOutcome, conn: Connection) -> None:
    """The host's remote commands so far, into its report (label redacted, seconds, exit code, session)."""
    outcome.exec_count = conn.transcript.exec_count
    outcome.commands = [{"label": conn.transcript.redact(r.label), "seconds": round(r.seconds, 3),
                         "exit_code": r.exit_code, "new_session": r.new_session, "step": r.activity}
                        for r in conn.transcript.records]


def predicted(ctx: StepContext, changes: list[Action]) -> str:
    """Check mode: a step's status, and its planned writes recorded as made, so that later steps plan for them
    (a unit file written: daemon-reload; a package source: refresh the lists), as they would in the run."""
    for action in changes:
        if action.writes:
            ctx.wrote(action.writes)
    return "would-change" if changes else "ok"


def require_root(facts: Facts, host: str, step: Step, changes: list[Action]) -> None:
    """A change made as root, by a login that is not root and has no become: the run would fail at it (apt's
    "Permission denied"). Said so, in check mode too, with the fix."""
    if not changes or not step.needs_root or facts.uid in (0, None):
        return
    user = facts.user or f"uid {facts.uid}"
    raise StepFailed(f"{host} logs in as {user}, not root, and become is off: \"{changes[0].summary}\" must run as "
                     "root",
                     fix="set ansible_become: true (become: true) for this host (and become_password if its sudo asks "
                     "for one), or log in as root (ansible_user: root)")
