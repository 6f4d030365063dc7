"""`dev_char_links`: the /dev/char/MAJOR:MINOR links of the NVIDIA device nodes, so `systemctl daemon-reload` cannot
take the GPUs from running containers (NVIDIA/nvidia-container-toolkit issues 251, 1227; runc with the systemd
cgroup driver finds devices through /dev/char).

The fix is NVIDIA's own: `nvidia-ctk system create-dev-char-symlinks --create-all` now, and a udev rule that runs it
whenever the driver binds (every boot, every driver reload). The links are then checked: every NVIDIA character
device must have /dev/char/MAJOR:MINOR leading to a node with its numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpunode.connection import q
from gpunode.facts import Facts
from gpunode.parsers.dev_char import link_problems, link_states
from gpunode.scripts import script_text
from gpunode.steps.base import Action, Step, StepContext, StepFailed, arg, register
from gpunode.steps.probe import Snippets
from gpunode.steps.remote_file import parse_file_probe, probe_file, write_action
from gpunode.vendor_facts import Fact, Pin, Source, fact_table, value

_NOTICE = "https://github.com/NVIDIA/nvidia-container-toolkit/issues/48"
TOOLKIT_PIN = Pin("NVIDIA/nvidia-container-toolkit", "d34b3046758cb1a5db606b2a39519c731bbf9f56")
_CMD = "cmd/nvidia-ctk/system/create-dev-char-symlinks/create-dev-char-symlinks.go"

DEV_CHAR = fact_table("nvidia-dev-char", {
    "command": Fact("nvidia-ctk system create-dev-char-symlinks --create-all", TOOLKIT_PIN.at(_CMD, "61-91"),
                    "--create-all: every possible /dev/char link, not only those of existing nodes"),
    "rule": Fact('# This will create /dev/char symlinks to all device nodes\n'
                 'ACTION=="add", DEVPATH=="/bus/pci/drivers/nvidia", '
                 'RUN+="/usr/bin/nvidia-ctk system create-dev-char-symlinks --create-all"\n',
                 Source(url=_NOTICE), "NVIDIA's notice (section 5, workarounds): the udev rule, word for word; the "
                 "same text in klueska's comment on NVIDIA/nvidia-docker issue 1671"),
    "rule_path": Fact("/lib/udev/rules.d/71-nvidia-dev-char.rules", Source(url=_NOTICE),
                      "'a good place to install this rule'"),
    "why": Fact("/dev/char", Pin("NVIDIA/cloud-native-docs", "52dcb7b8d956784344e241df476de17094a4574c").at(
        "container-toolkit/troubleshooting.md", "150-157"),
        "runc with the systemd cgroup driver loses devices whose /dev/char links are missing"),
})


@register
@dataclass
class DevCharLinksStep(Step):
    """NVIDIA's udev rule that keeps /dev/char links for the NVIDIA devices, the links made now, and checked."""

    kind = "dev_char_links"
    facts_sections = frozenset()
    rule_path: str = arg(value(DEV_CHAR, "rule_path"), "where the udev rule goes (NVIDIA's suggestion)")

    def probe(self, facts: Facts) -> Snippets:
        return {"rule": probe_file(self.rule_path), "ctk": "command -v nvidia-ctk || true",
                "links": f"sh -c {q(script_text('dev_char_links.sh'))} dev-char-links"}

    def plan(self, ctx: StepContext) -> list[Action]:
        actions = []
        rule = parse_file_probe(ctx.probe["rule"])
        wanted = value(DEV_CHAR, "rule")
        if not rule.exists or rule.content != wanted:
            action = write_action(self.rule_path, rule, wanted, mode="0644",
                                  reason="NVIDIA's rule re-creates the /dev/char links whenever the driver binds")
            actions.append(action)
        problems = link_problems(ctx.probe["links"])
        if not link_states(ctx.probe["links"]):
            ctx.notes.append("no NVIDIA device nodes on this host (no driver loaded): the udev rule makes the "
                             "/dev/char links when the driver binds")
            return actions
        if not problems:
            ctx.notes.append(f"/dev/char links present for {len(link_states(ctx.probe['links']))} NVIDIA devices")
            return actions
        toolkit_coming = any("nvidia-container-toolkit" in p for p in ctx.state.installing)
        if not ctx.probe["ctk"].strip() and not (ctx.check and toolkit_coming):
            raise StepFailed(f"{problems[0]}, and nvidia-ctk is not installed to create the links",
                             fix="install the NVIDIA container toolkit first (the container_toolkit step)")
        actions.append(Action(f"create the /dev/char links ({len(problems)} missing or wrong)",
                              "; ".join(problems[:4]) + ("; ..." if len(problems) > 4 else ""),
                              value(DEV_CHAR, "command"), timeout=120,
                              fix="the NVIDIA modules must be loaded (lsmod | grep nvidia)"))
        actions.append(Action("check every NVIDIA device has its /dev/char link", "after nvidia-ctk",
                              f"sh -c {q(script_text('dev_char_links.sh'))} dev-char-links '' verify",
                              timeout=60, changes=False,
                              fix="see which link the output names; `ls -l /dev/char | grep nvidia` on the host"))
        return actions
