"""`service`: a systemd unit started/stopped/restarted and enabled/disabled."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpunode.connection import q
from gpunode.facts import Facts
from gpunode.steps.base import Action, Step, StepContext, StepFailed, register


@register
@dataclass
class ServiceStep(Step):
    """Ensure a systemd unit's state. `restarted`/`reloaded` always act: use them as handlers."""

    kind = "service"
    name: str
    state: Literal["started", "stopped", "restarted", "reloaded"] | None = None
    enabled: bool | None = None

    def probe(self, facts: Facts) -> str:
        return f"systemctl show -p LoadState -p ActiveState -p UnitFileState -- {q(self.name)} 2>&1; true"

    def plan(self, ctx: StepContext) -> list[Action]:
        props = dict(line.split("=", 1) for line in ctx.probe_output.splitlines() if "=" in line)
        unit = q(self.name)
        if props.get("LoadState") == "not-found":
            if self.enabled is True or self.state in ("started", "restarted", "reloaded"):
                raise StepFailed(f"unit {self.name} not found: it cannot be {self.state or 'enabled'}",
                                 fix=f"install the package that provides {self.name}, or fix the unit name")
            ctx.notes.append(f"{self.name} is not installed: already disabled and stopped")
            return []
        active = props.get("ActiveState") in ("active", "activating", "reloading")
        enabled = props.get("UnitFileState") in ("enabled", "enabled-runtime", "static", "alias", "indirect")
        actions = []
        if self.enabled is True and not enabled:
            actions.append(Action(f"enable {self.name}", f"unit file state is {props.get('UnitFileState')}",
                                  f"systemctl enable -- {unit}"))
        if self.enabled is False and props.get("UnitFileState") == "enabled":
            actions.append(Action(f"disable {self.name}", "enabled", f"systemctl disable -- {unit}"))
        if self.state == "started" and not active:
            actions.append(Action(f"start {self.name}", f"it is {props.get('ActiveState')}",
                                  f"systemctl start -- {unit}",
                                  fix=f"look at `journalctl -u {self.name}` on the host for why it fails"))
        elif self.state == "stopped" and active:
            actions.append(Action(f"stop {self.name}", "it is running", f"systemctl stop -- {unit}"))
        elif self.state in ("restarted", "reloaded"):
            verb = "restart" if self.state == "restarted" else "reload-or-restart"
            actions.append(Action(f"{verb} {self.name}", "requested", f"systemctl {verb} -- {unit}",
                                  fix=f"look at `journalctl -u {self.name}` on the host for why it fails"))
        return actions
