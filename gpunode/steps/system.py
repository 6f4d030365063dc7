"""Host-level steps: wait for the package manager, reboot."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpunode.connection import q
from gpunode.scripts import script_text
from gpunode.steps.base import Action, Step, StepContext, arg, register


@register
@dataclass
class WaitForPackageManagerStep(Step):
    """Wait for dpkg/apt/dnf locks held by cloud-init, unattended-upgrades or apt-daily; name the holder."""

    kind = "wait_for_package_manager"
    facts_sections = frozenset({"pkgmgr"})
    timeout: int = arg(600, "seconds to wait for the locks")

    def plan(self, ctx: StepContext) -> list[Action]:
        pkg = ctx.facts.pkg
        if not pkg.lock_holders and not pkg.cloud_init_running:
            return []
        holders = "; ".join(f"{h.path} held by pid {h.pid} ({h.command})" for h in pkg.lock_holders)
        reason = holders or "cloud-init is still running"
        return [Action(
            "wait for the package manager", reason,
            f"sh -c {q(script_text('wait_for_package_manager.sh'))} wait-pm {self.timeout}",
            timeout=self.timeout + 60, changes=False,
            fix="let the holder finish (first-boot upgrades can take minutes), raise timeout, or disable "
            "unattended-upgrades in the image (apt-daily*.timer)",
        )]


@register
@dataclass
class RebootStep(Step):
    """Reboot when required (a new kernel, nouveau blacklisted, /var/run/reboot-required) or always.

    `mode: defer` records the pending reboot without doing it (image baking: the image boots fresh anyway).
    """

    kind = "reboot"
    facts_sections = frozenset({"pkgmgr"})
    if_required: bool = arg(True, "only when a step asked for a reboot (false: always)")
    mode: Literal["now", "defer"] = arg("now", "defer: record the pending reboot without doing it (image baking)")
    timeout: int = arg(600, "seconds for the host to come back")
    reason: str | None = arg(None, "why, shown in the plan")

    def plan(self, ctx: StepContext) -> list[Action]:
        required = ctx.reboot_required or ctx.facts.pkg.reboot_required
        if self.if_required and not required:
            return []
        reasons = ctx.state.reboot_reasons or (["/var/run/reboot-required exists"] if required else [])
        why = self.reason or "; ".join(reasons) or "always reboot"
        if self.mode == "defer":
            ctx.notes.append(f"reboot pending ({why}); deferred: the new state takes effect at the next boot")
            return []
        return [Action("reboot", why, reboot=True, timeout=self.timeout)]
