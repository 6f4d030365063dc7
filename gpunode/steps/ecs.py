"""`ecs_gpu_support`: let the ECS agent (what AWS Batch starts jobs through) hand GPUs to containers.

The agent gives a task GPUs only with ECS_ENABLE_GPU_SUPPORT=true (aws/amazon-ecs-agent agent/config/config.go).
AWS's ECS GPU AMI writes it to /var/lib/ecs/ecs.config, the image's own settings, which ecs-init reads under the
user's /etc/ecs/ecs.config; ecs-init drops a true value there when no NVIDIA device shows up, so the image still
boots on instance types without GPUs (gpunode/vendor_aws.py cites each of these). This step does the same when the
ECS agent and an NVIDIA driver are both on the host, and nothing otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpunode.facts import Facts
from gpunode.steps.base import Action, Step, StepContext, StepFailed, register
from gpunode.steps.ecs_config import INSTANCE_CONFIG, KEY, USER_CONFIG, VALUE, config_value, set_key
from gpunode.steps.image import ImageValidateStep, validate_snippets
from gpunode.steps.probe import Snippets
from gpunode.steps.remote_file import parse_file_probe, probe_file, write_action

AGENT_PROBE = ("if systemctl cat ecs.service >/dev/null 2>&1; then echo unit; fi; "
               "if [ -x /usr/libexec/amazon-ecs-init ]; then echo program; fi")


@register
@dataclass
class EcsGpuSupportStep(Step):
    """ECS_ENABLE_GPU_SUPPORT=true in the image's ECS config when the ECS agent and an NVIDIA driver are present."""

    kind = "ecs_gpu_support"
    facts_sections = frozenset({"gpu", "packages", "services"})  # facts.nvidia: the driver's packages and DKMS

    def probe(self, facts: Facts) -> Snippets:
        return {"agent": AGENT_PROBE, "instance": probe_file(INSTANCE_CONFIG), "user": probe_file(USER_CONFIG),
                **validate_snippets(("modules",))}

    def plan(self, ctx: StepContext) -> list[Action]:
        if not ctx.probe["agent"].split():
            ctx.notes.append("no ECS agent (ecs.service) on this host: GPU support not configured")
            return []
        if not ImageValidateStep._has_driver(ctx, ctx.probe):
            ctx.notes.append("no NVIDIA driver on this host: ECS GPU support left off")
            return []
        user = parse_file_probe(ctx.probe["user"])
        overridden = config_value(user.content) if user.exists else None
        if overridden not in (None, VALUE):
            raise StepFailed(f"{USER_CONFIG} sets {KEY}={overridden}, which overrides the image's {INSTANCE_CONFIG}: "
                             "the ECS agent would give Batch/ECS GPU jobs no GPU",
                             fix=f"remove that line from {USER_CONFIG} (or set {KEY}={VALUE}) and run again")
        instance = parse_file_probe(ctx.probe["instance"])
        if overridden == VALUE or config_value(instance.content) == VALUE:
            ctx.notes.append(f"ECS GPU support on ({USER_CONFIG if overridden else INSTANCE_CONFIG})")
            return []
        action = write_action(INSTANCE_CONFIG, instance, set_key(instance.content),
                              reason=f"the ECS agent and an NVIDIA driver are present but {KEY} is not {VALUE}")
        action.summary = f"enable ECS GPU support ({KEY}={VALUE} in {INSTANCE_CONFIG})"
        return [action]
