"""`acceptance_program`: the node's own acceptance runner (scripts/accept_node.py, stdlib Python 3) installed where
its consumers call it: `accept_at_boot`'s unit, node-problem-detector's custom plugin (kube_npd.py) and Slurm's
HealthCheckProgram (scripts/slurm_healthcheck.sh, docs/slurm.md), with what the node should have in its config."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

from gpunode.facts import Facts
from gpunode.scripts import script_text
from gpunode.steps.base import Action, ArgumentError, Step, StepContext, arg, register
from gpunode.steps.probe import Snippets
from gpunode.steps.remote_file import parse_file_probe, probe_file, write_action

PROGRAM = "/usr/local/libexec/gpunode/accept"
CONFIG = "/etc/gpunode/accept.json"
SLURM_HEALTHCHECK = "/usr/local/libexec/gpunode/slurm-healthcheck"


@register
@dataclass
class AcceptanceProgramStep(Step):
    """Install the node acceptance program (and, for Slurm nodes, the HealthCheckProgram that drains on a miss)."""

    kind = "acceptance_program"
    facts_sections = frozenset()
    expect_gpus: int | None = arg(None, "the GPUs this node must show (its config's expect_gpus); null: any")
    expect_model: str | None = arg(None, "the GPU model it must show, as nvidia-smi names it or the catalogue's "
                                         "key (docs/gpu-models.md); null: any")
    budget: int | None = arg(None, "the quick tier's time budget in seconds (null: the runner's 60)")
    slurm_healthcheck: bool = arg(False, "also install Slurm's HealthCheckProgram "
                                         f"({SLURM_HEALTHCHECK}; slurm.conf lines: docs/slurm.md)")

    def __post_init__(self) -> None:
        if self.expect_gpus is not None and self.expect_gpus < 0:
            raise ArgumentError(f"acceptance_program.expect_gpus {self.expect_gpus}: 0 or more", "expect_gpus")
        if self.budget is not None and self.budget <= 0:
            raise ArgumentError(f"acceptance_program.budget {self.budget}: seconds above 0", "budget")

    def files(self) -> dict[str, tuple[str, str, str]]:
        """probe section -> (path, content, mode) of every file this step owns."""
        wanted = {"program": (PROGRAM, script_text("accept_node.py"), "0755")}
        config = {k: v for k, v in (("expect_gpus", self.expect_gpus), ("expect_model", self.expect_model),
                                    ("budget", self.budget)) if v is not None}
        if config:
            wanted["config"] = (CONFIG, json.dumps(config, indent=2, sort_keys=True) + "\n", "0644")
        if self.slurm_healthcheck:
            wanted["slurm"] = (SLURM_HEALTHCHECK, script_text("slurm_healthcheck.sh"), "0755")
        return wanted

    def probe(self, facts: Facts) -> Snippets:
        return {name: probe_file(path) for name, (path, _, _) in self.files().items()}

    def plan(self, ctx: StepContext) -> list[Action]:
        actions = []
        for name, (path, content, mode) in self.files().items():
            current = parse_file_probe(ctx.probe[name])
            if current.exists and current.content == content and current.mode == mode.lstrip("0"):
                continue
            if name == "config":
                actions.append(write_action(path, current, content, mode=mode, reason="what this node must show"))
                continue
            # gpunode's own program: no backup and no diff of thousands of lines, the reason says what differs
            reason = ("the node's acceptance checks call it" if not current.exists else
                      "not the one this gpunode ships" if current.content != content else f"mode {current.mode}")
            actions.append(replace(write_action(path, current, content, mode=mode, backup=False, reason=reason),
                                   diff=None))
        return actions
