"""`accept_at_boot`: a systemd unit that runs the node's acceptance program (quick tier) at every boot before the
node's scheduler agent starts, and keeps that agent from starting when the node fails.

How a miss keeps the node out (docs/kube-acceptance.md has the choice): the unit is a oneshot ordered
`Before=kubelet.service slurmd.service ecs.service` and installed `RequiredBy=` them, so `systemctl enable` puts it
in each agent's `.requires/`. systemd.unit(5), Requires=: "If one of the other units fails to activate, and an
ordering dependency After= on the failing unit is set, this unit will not be started." A failed acceptance thus
leaves kubelet (no Node registered, or NotReady), slurmd (the node stays DOWN) and the ECS agent (no container
instance) stopped, with the reason in `journalctl -u gpunode-accept-boot`. One mechanism for all three schedulers,
and no scheduler configuration to change; a taint (kubelet --register-with-taints) would cover Kubernetes only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpunode.facts import Facts
from gpunode.steps.base import Action, ArgumentError, Step, StepContext, StepFailed, arg, register
from gpunode.steps.probe import Snippets
from gpunode.steps.remote_file import parse_file_probe, probe_file, write_action
from gpunode.vendor_facts import Fact, Source, fact_table

_UNIT_DOC = "https://www.freedesktop.org/software/systemd/man/latest/systemd.unit.html"
_SERVICE_DOC = "https://www.freedesktop.org/software/systemd/man/latest/systemd.service.html"

SYSTEMD = fact_table("systemd-units", {
    "requires": Fact("Requires=", Source(url=_UNIT_DOC),
                     "with After= on the failing unit, the requiring unit is not started when it fails"),
    "required_by": Fact("RequiredBy=", Source(url=_UNIT_DOC),
                        "[Install]: `systemctl enable` adds the unit to each listed unit's .requires/ folder"),
    "before": Fact("Before=", Source(url=_UNIT_DOC), "ordering only; a unit that is not there is ignored"),
    "oneshot": Fact("Type=oneshot", Source(url=_SERVICE_DOC),
                    "the unit is started when ExecStart= has exited; with RemainAfterExit=yes it stays active, so "
                    "the check runs once per boot, not at each restart of the agent"),
    "timeout": Fact("TimeoutStartSec=", Source(url=_SERVICE_DOC),
                    "a oneshot that runs longer fails: the agent is not started"),
})

PROGRAM = "/usr/local/libexec/gpunode/accept"
UNIT = "gpunode-accept-boot.service"
UNIT_PATH = f"/etc/systemd/system/{UNIT}"
AGENTS = ("kubelet.service", "slurmd.service", "ecs.service")
# the driver's daemons first, where present: persistence and the NVSwitch fabric must be up before CUDA is judged
AFTER = ("systemd-modules-load.service", "nvidia-persistenced.service", "nvidia-fabricmanager.service")


def unit_text(tier: str = "quick", timeout_s: int = 180, agents: tuple[str, ...] = AGENTS,
              program: str = PROGRAM) -> str:
    """The unit file: a oneshot that must succeed before the agents start (sources in SYSTEMD above)."""
    return (
        "# Written by gpunode (accept_at_boot): the node's acceptance program must pass before its scheduler\n"
        "# agent starts; a failure leaves the agent stopped (RequiredBy= + Before=). Reason: journalctl -u "
        f"{UNIT}\n"
        "[Unit]\n"
        f"Description=gpunode acceptance ({tier} tier) before the node joins its scheduler\n"
        f"After={' '.join(AFTER)}\n"
        f"Before={' '.join(agents)}\n"
        "\n[Service]\n"
        "Type=oneshot\n"
        "RemainAfterExit=yes\n"
        f"ExecStart={program} --tier {tier} --format text\n"
        f"TimeoutStartSec={timeout_s}\n"
        "\n[Install]\n"
        "WantedBy=multi-user.target\n"
        f"RequiredBy={' '.join(agents)}\n"
    )


@register
@dataclass
class AcceptAtBootStep(Step):
    """Install the boot-time acceptance unit (the quick tier before kubelet / slurmd / the ECS agent)."""

    kind = "accept_at_boot"
    facts_sections = frozenset()
    mode: Literal["auto", "yes", "no"] = arg("auto", "auto: when the acceptance program is on the host; yes: it "
                                             "must be; no: no unit")
    tier: str = arg("quick", "the acceptance tier run at boot (quick: about a minute)")
    timeout: int = arg(180, "seconds the boot check may take before it counts as failed")

    def __post_init__(self) -> None:
        if self.tier not in ("quick", "standard", "burn-in"):
            raise ArgumentError(f"accept_at_boot.tier {self.tier!r}: quick, standard or burn-in", "tier")

    def probe(self, facts: Facts) -> Snippets:
        return {"unit": probe_file(UNIT_PATH), "program": f"[ -x {PROGRAM} ] && echo present || true",
                "enabled": f"systemctl is-enabled {UNIT} 2>/dev/null || true"}

    def plan(self, ctx: StepContext) -> list[Action]:
        if self.mode == "no":
            return []
        if "present" not in ctx.probe["program"]:
            if self.mode == "auto":
                ctx.notes.append(f"no acceptance program at {PROGRAM}: no boot-time acceptance unit")
                return []
            raise StepFailed(f"accept_at_boot: {PROGRAM} is not on the host",
                             fix="install the node acceptance program first, or set accept_at_boot: auto")
        current = parse_file_probe(ctx.probe["unit"])
        wanted = unit_text(self.tier, self.timeout)
        actions = []
        changed = not current.exists or current.content != wanted
        if changed:
            actions.append(write_action(UNIT_PATH, current, wanted, mode="0644",
                                        reason="the acceptance check must pass before the scheduler agent starts"))
        enabled = ctx.probe["enabled"].strip() == "enabled"
        if changed or not enabled:
            verb = "reenable" if enabled else "enable"  # reenable: the RequiredBy= links follow a changed unit
            state = ctx.probe["enabled"].strip() or "not enabled"
            actions.append(Action(f"systemctl {verb} {UNIT} (RequiredBy= {', '.join(AGENTS)})",
                                  "unit changed" if changed else f"unit is {state}",
                                  f"systemctl daemon-reload && systemctl {verb} {UNIT}", timeout=120,
                                  fix=f"see `systemctl status {UNIT}` on the host"))
        return actions
