"""AWS Batch images: `ecs_gpu_support` and image_validate's ECS checks, planned from probe output (no host).

Vendor sources (gpunode/vendor_aws.py has each with its line):
- aws/amazon-ecs-ami@a2532d35 scripts/al2023/gpu/enable-ecs-agent-gpu-support-al2023.sh lines 11-12: AWS's GPU AMI
  writes ECS_ENABLE_GPU_SUPPORT=true to /var/lib/ecs/ecs.config; nothing in the plain ECS AMI's build does.
- aws/amazon-ecs-agent@8dfceca6 ecs-init/docker/docker.go lines 400-426 and 438-456: ecs-init reads
  /var/lib/ecs/ecs.config, then /etc/ecs/ecs.config over it; each trimmed line split at its first '='.
- aws/amazon-ecs-agent@8dfceca6 agent/config/config.go line 140 (DefaultNvidiaRuntime "nvidia"), line 593
  (ECS_NVIDIA_RUNTIME), agent/api/task/task.go lines 2128-2138: every GPU container gets that Docker runtime.
"""

from __future__ import annotations

import pytest

from gpunode.facts import Facts
from gpunode.inventory import Host
from gpunode.steps import StepContext, StepFailed, build_step
from gpunode.steps.ecs_config import config_value, set_key
from gpunode.steps.image import ecs_problems
from gpunode.steps.probe import ProbeOutput
from gpunode.steps.remote_file import CONTENT_PREFIX

MODULE = "/lib/modules/6.1.0-27-cloud-amd64/updates/dkms/nvidia.ko"
AGENT = "unit\nprogram\n"
ECS_OK = "enabled enabled\nprogram /usr/libexec/amazon-ecs-init yes\nconfig yes\n"


def file_probe(content: str | None) -> str:
    import base64

    if content is None:
        return "absent\n"
    return f"present\n644 root root\n{CONTENT_PREFIX}{base64.b64encode(content.encode()).decode()}\n"


def plan(instance: str | None = None, user: str | None = "", agent: str = AGENT, modules: str = MODULE,
         check: bool = False) -> tuple[list, list[str]]:
    step = build_step("ecs_gpu_support", {})
    probe = ProbeOutput({"agent": agent, "instance": file_probe(instance), "user": file_probe(user),
                         "modules": modules})
    ctx = StepContext(Host("h", "10.0.0.1"), Facts(), None, check, probe)  # type: ignore[arg-type]
    return step.plan(ctx), ctx.notes


def test_the_plain_ecs_ami_gets_gpu_support_where_the_gpu_ami_has_it() -> None:
    """--base al2023-ecs + gpu-node used to fail its last step: nothing wrote the key (the GPU AMI's build script
    is the only writer in aws/amazon-ecs-ami)."""
    (action,), _ = plan(instance=None, user="ECS_CLUSTER=batch\n")
    assert action.summary == "enable ECS GPU support (ECS_ENABLE_GPU_SUPPORT=true in /var/lib/ecs/ecs.config)"
    assert action.stdin == b"ECS_ENABLE_GPU_SUPPORT=true\n"
    assert "atomic-write" in (action.command or "") and "/var/lib/ecs/ecs.config" in (action.command or "")
    assert "+ECS_ENABLE_GPU_SUPPORT=true" in (action.diff or "")  # what check mode shows
    assert action.writes == "/var/lib/ecs/ecs.config"


def test_the_other_lines_are_kept_and_a_wrong_value_replaced() -> None:
    before = "# set by the AMI\nECS_ENABLE_GPU_SUPPORT=false\nECS_LOGLEVEL=debug\nECS_ENABLE_GPU_SUPPORT=0\n"
    (action,), _ = plan(instance=before)
    assert action.stdin == b"# set by the AMI\nECS_ENABLE_GPU_SUPPORT=true\nECS_LOGLEVEL=debug\n"
    assert "-ECS_ENABLE_GPU_SUPPORT=false" in (action.diff or "")
    assert set_key("ECS_LOGLEVEL=info") == "ECS_LOGLEVEL=info\nECS_ENABLE_GPU_SUPPORT=true\n"


@pytest.mark.parametrize(("instance", "user"), [("ECS_ENABLE_GPU_SUPPORT=true\n", ""),
                                                 (None, "ECS_CLUSTER=x\nECS_ENABLE_GPU_SUPPORT=true\n"),
                                                 ("ECS_ENABLE_GPU_SUPPORT=true\n", "ECS_ENABLE_GPU_SUPPORT=true")])
def test_converged_when_ecs_init_already_reads_true(instance: str | None, user: str) -> None:
    actions, notes = plan(instance=instance, user=user)
    assert actions == [] and any("ECS GPU support on" in n for n in notes)


def test_nothing_without_the_agent_or_without_a_driver() -> None:
    actions, notes = plan(agent="")
    assert actions == [] and "no ECS agent" in notes[0]
    actions, notes = plan(modules="")
    assert actions == [] and "no NVIDIA driver" in notes[0]


def test_the_users_false_is_refused_not_overwritten() -> None:
    with pytest.raises(StepFailed, match="/etc/ecs/ecs.config sets ECS_ENABLE_GPU_SUPPORT=false") as failed:
        plan(instance=None, user="ECS_ENABLE_GPU_SUPPORT=false\n")
    assert "remove that line" in failed.value.fix


def test_values_are_read_as_ecs_init_reads_them() -> None:
    assert config_value("ECS_ENABLE_GPU_SUPPORT=true") == "true"
    assert config_value("  ECS_ENABLE_GPU_SUPPORT=true  \n") == "true"  # the line is trimmed
    assert config_value("ECS_ENABLE_GPU_SUPPORT = true") is None         # the key is not: "ECS_ENABLE_GPU_SUPPORT "
    assert config_value('ECS_ENABLE_GPU_SUPPORT="true"') == '"true"'     # nor unquoted
    assert config_value("ECS_ENABLE_GPU_SUPPORT=true\nECS_ENABLE_GPU_SUPPORT=false") == "false"  # last wins


def conf(path: str, line: str) -> str:
    return f"conf {path}\t{line}\n"


def test_validation_wants_dockers_nvidia_runtime() -> None:
    """An image whose Docker lacks the runtime the agent sets (`nvidia`) passed before: every GPU job then fails."""
    gpu_on = ECS_OK + conf("/var/lib/ecs/ecs.config", "ECS_ENABLE_GPU_SUPPORT=true")
    notes: list[str] = []
    problems = ecs_problems(gpu_on + "runtimes io.containerd.runc.v2 runc \n", True, notes)
    assert problems == ["Docker has no runtime named 'nvidia' (it has: io.containerd.runc.v2, runc): the ECS agent "
                        "sets it for every GPU container, so every Batch GPU job would fail to start"]
    assert ecs_problems(gpu_on + "runtimes io.containerd.runc.v2 nvidia runc \n", True, notes) == []
    assert notes[-1] == "ECS agent enabled, its configuration present, GPU support on, Docker runtime nvidia"
    custom = gpu_on + conf("/etc/ecs/ecs.config", "ECS_NVIDIA_RUNTIME=nvidia-cdi")
    assert "no runtime named 'nvidia-cdi'" in ecs_problems(custom + "runtimes nvidia runc\n", True, [])[0]
    assert "Docker is not installed" in ecs_problems(gpu_on + "docker missing\n", True, [])[0]
    assert "`docker info` failed" in ecs_problems(gpu_on + "docker down\n", True, [])[0]
    assert ecs_problems(ECS_OK + "docker missing\n", False, []) == []  # no driver: no GPU jobs to run


def test_validation_reads_the_users_file_over_the_images() -> None:
    both = (ECS_OK + conf("/var/lib/ecs/ecs.config", "ECS_ENABLE_GPU_SUPPORT=true")
            + conf("/etc/ecs/ecs.config", "ECS_ENABLE_GPU_SUPPORT=false") + "runtimes nvidia runc\n")
    assert "Batch GPU jobs would get no GPU" in ecs_problems(both, True, [])[0]
    spaced = ECS_OK + conf("/etc/ecs/ecs.config", "ECS_ENABLE_GPU_SUPPORT = true") + "runtimes nvidia\n"
    assert "Batch GPU jobs would get no GPU" in ecs_problems(spaced, True, [])[0]  # ecs-init reads no such key


def test_the_ecs_gpu_base_defaults_to_the_base_playbook_and_refuses_gpu_node(tmp_path) -> None:
    """README (AWS Batch): the ECS GPU AMI carries AWS's driver; another one breaks it. Without --playbook that base
    gets `base`, other bases gpu-node; gpu-node (an nvidia_driver step) on it exits 2 before any build folder."""
    from gpunode.clouds.aws import CLOUD as AWS
    from gpunode.image.build import BuildRequest
    from tests.conftest import run_cli

    assert AWS.default_playbook(BuildRequest(base="al2023-ecs-gpu")) == "base"
    assert AWS.default_playbook(BuildRequest(base="al2023-ecs")) == "gpu-node"
    assert AWS.default_playbook(BuildRequest(base="ubuntu-22.04")) == "gpu-node"
    env = {"GPUNODE_BUILDS": str(tmp_path / "builds")}
    refused = run_cli("build-ami", "--base", "al2023-ecs-gpu", "--playbook", "gpu-node", "--validate-only", env=env)
    assert refused.code == 2, refused.output
    assert "installs another driver" in refused.output and "--playbook base" in refused.output, refused.output
    assert "gpu-node.yml:" in refused.output
    default = run_cli("build-ami", "--base", "al2023-ecs-gpu", "--validate-only", env=env)
    assert "installs another driver" not in default.output, default.output
    assert default.code == 0 or "packer not found" in default.output, default.output
    assert not (tmp_path / "builds").exists() or not any((tmp_path / "builds").iterdir())
