"""`service`: a systemd unit started/stopped/restarted and enabled/disabled, with daemon-reload when needed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpunode.connection import ExecResult, q
from gpunode.facts import Facts
from gpunode.parsers.systemd import UnitState, parse_unit
from gpunode.steps.base import Action, Step, StepContext, StepFailed, arg, register
from gpunode.steps.probe import Snippets

JOURNAL_LINES = 15


def verified(verb: str, name: str) -> str:
    """`systemctl VERB` and then a check that the unit is still active a moment later (a unit that dies at once
    fails here, with its last journal lines), a finished oneshot counting as success."""
    unit = q(name)
    journal = f"journalctl -u {unit} -n {JOURNAL_LINES} --no-pager -o short 2>&1"
    return (
        f"systemctl {verb} -- {unit} || {{ rc=$?; {{ echo 'its last journal lines:'; {journal}; }} >&2; exit $rc; }};"
        f" sleep 1; state=$(systemctl show -p ActiveState --value -- {unit});"
        f" sub=$(systemctl show -p SubState --value -- {unit}); res=$(systemctl show -p Result --value -- {unit});"
        ' case "$state/$sub/$res" in active/*|reloading/*|inactive/*/success|activating/start*) exit 0;; esac;'
        f' {{ printf "%s is %s (%s, result %s) right after {verb}; its last journal lines:\\n" {unit} "$state"'
        f' "$sub" "$res"; {journal}; }} >&2; exit 3'
    )


@register
@dataclass
class ServiceStep(Step):
    """Ensure a systemd unit's state. `restarted`/`reloaded` always act: use them as handlers.

    `started` and `restarted` check that the unit is active a second later. Unit files or drop-ins changed
    on disk (systemd's NeedDaemonReload, or written by an earlier step of this run) are reloaded first;
    `daemon_reload: true` always reloads (as Ansible's systemd module).
    """

    kind = "service"
    facts_sections = frozenset()
    name: str = arg(doc="the systemd unit (docker, nvidia-persistenced.service, apt-daily.timer)")
    state: Literal["started", "stopped", "restarted", "reloaded"] | None = arg(None, "none: the state is left as it "
                                                                               "is")
    enabled: bool | None = arg(None, "started at boot; none: left as it is")
    daemon_reload: bool = arg(False, "always `systemctl daemon-reload` first")

    def probe(self, facts: Facts) -> Snippets:
        return {"unit": f"systemctl show -p LoadState -p ActiveState -p SubState -p UnitFileState -p NeedDaemonReload"
                f" -- {q(self.name)} 2>&1"}

    def plan(self, ctx: StepContext) -> list[Action]:
        unit = parse_unit(ctx.probe["unit"])
        pending = unit.need_daemon_reload or ctx.state.daemon_reload_pending
        actions = self._reload(ctx, pending)
        installing: str | None = ""
        if unit.not_found and not pending:
            installing = self._not_found(ctx)
            if installing is None:
                return actions
            unit = UnitState(load_state="loaded", active_state="inactive", unit_file_state="disabled")
        actions += self._enable(unit) + self._state(unit)
        for action in actions if installing else ():
            action.reason = (f"would change (unknown until run): {self.name} is not installed yet, an earlier step "
                             f"installs {installing}")
        return actions

    def _enable(self, unit: UnitState) -> list[Action]:
        """`systemctl enable`/`disable` when the unit file state is not the one wanted."""
        if self.enabled is True and not unit.enabled:
            return [Action(f"enable {self.name}", f"unit file state is {unit.unit_file_state}",
                           f"systemctl enable -- {q(self.name)}")]
        if self.enabled is False and unit.unit_file_state == "enabled":
            return [Action(f"disable {self.name}", "enabled", f"systemctl disable -- {q(self.name)}")]
        return []

    def _state(self, unit: UnitState) -> list[Action]:
        """Start, stop, restart or reload: started/stopped only when the unit is not so already."""
        journal = f"look at `journalctl -u {self.name}` on the host (its last lines are above) for why it fails"
        if self.state == "started" and not unit.running:
            state = f"{unit.active_state}" + (" (auto-restart)" if unit.auto_restart else "")
            return [Action(f"start {self.name}", f"it is {state}", verified("start", self.name), fix=journal)]
        if self.state == "stopped" and unit.running:
            return [Action(f"stop {self.name}", "it is running", f"systemctl stop -- {q(self.name)}")]
        if self.state == "restarted":
            return [Action(f"restart {self.name}", "requested", verified("restart", self.name), fix=journal)]
        if self.state == "reloaded":
            return [Action(f"reload-or-restart {self.name}", "requested", verified("reload-or-restart", self.name),
                           fix=journal)]
        return []

    def _reload(self, ctx: StepContext, pending: bool) -> list[Action]:
        """`systemctl daemon-reload` first when unit files changed (or asked for); in check mode the later steps
        then see it done, as after_action makes them see it in the run."""
        if not (pending or self.daemon_reload):
            return []
        if ctx.check:
            ctx.state.daemon_reload_pending = False
        why = "unit files changed on disk" if pending else "daemon_reload requested"
        return [Action("systemctl daemon-reload", why, "systemctl daemon-reload", changes=bool(pending))]

    def _not_found(self, ctx: StepContext) -> str | None:
        """A unit that does not exist: nothing to do when it is to be stopped or disabled (None); in check mode, one
        that a package an earlier step installs may bring is planned as a new, stopped unit (the packages being
        installed are returned); else a failure."""
        if not (self.enabled is True or self.state in ("started", "restarted", "reloaded")):
            ctx.notes.append(f"{self.name} is not installed: already disabled and stopped")
            return None
        if ctx.check and ctx.state.installing:
            return ", ".join(ctx.state.installing)
        raise StepFailed(f"unit {self.name} not found: it cannot be {self.state or 'enabled'}",
                         fix=f"install the package that provides {self.name}, or fix the unit name")

    def after_action(self, ctx: StepContext, action: Action, result: ExecResult) -> None:
        if action.command == "systemctl daemon-reload":
            ctx.state.daemon_reload_pending = False
