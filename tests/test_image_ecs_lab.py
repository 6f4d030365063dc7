"""An AWS Batch image on a real lab host: ecs_gpu_support writes, keeps, converges; validation asks real Docker.

The ECS agent is a stand-in (tests/test_image_lab.py ECS_AGENT) and the driver a planted nvidia.ko, but Docker is
Debian's docker.io installed and given the nvidia runtime by gpu-node.yml's own steps, and its runtimes are what
`docker info` says. Vendor facts: aws/amazon-ecs-ami scripts/al2023/gpu/enable-ecs-agent-gpu-support-al2023.sh
lines 11-12 (the GPU AMI's ECS_ENABLE_GPU_SUPPORT=true in /var/lib/ecs/ecs.config); aws/amazon-ecs-agent
agent/config/config.go line 140 and agent/api/task/task.go lines 2128-2138 (every GPU container runs with Docker's
runtime `nvidia`); commits in gpunode/vendor_aws.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import host_inventory, run_cli
from tests.test_image_lab import ECS_AGENT
from tests.test_lab_container_runtimes import inside, provision, runtime_playbook

pytestmark = pytest.mark.lab


def test_a_batch_image_gets_gpu_support_and_needs_dockers_nvidia_runtime(lab, new_host, tmp_path: Path) -> None:
    host = new_host("bookworm")
    kernel = inside(host, "uname -r").strip()
    inside(host, f"{ECS_AGENT}\nmkdir -p /lib/modules/{kernel}/updates/dkms && "
                 f"touch /lib/modules/{kernel}/updates/dkms/nvidia.ko\n"
                 "printf 'ECS_LOGLEVEL=debug\\nECS_ENABLE_GPU_SUPPORT=false\\n' > /var/lib/ecs/ecs.config")
    inventory = host_inventory(lab, [host], tmp_path / "inv.yml")
    finalize = ["provision", "-i", str(inventory), "--playbook", "playbooks/image-finalize.yml",
                "--var", "cleanup_categories=[ecs-state]", "--var", "ecs_agent=true"]

    check = run_cli(*finalize, "--check")  # check mode: the diff, nothing written
    assert "-ECS_ENABLE_GPU_SUPPORT=false" in check.output and "+ECS_ENABLE_GPU_SUPPORT=true" in check.output
    assert inside(host, "cat /var/lib/ecs/ecs.config") == "ECS_LOGLEVEL=debug\nECS_ENABLE_GPU_SUPPORT=false\n"

    result, _ = provision(lab, host, runtime_playbook(tmp_path / "docker.yml", ("Docker",)), tmp_path)
    assert result.code == 0, result.output  # real Docker, no nvidia runtime yet
    no_runtime = run_cli(*finalize)
    assert no_runtime.code == 1, no_runtime.output
    assert "Docker has no runtime named 'nvidia' (it has: " in no_runtime.output  # from `docker info`
    assert "GPU jobs would get no GPU" not in no_runtime.output
    assert inside(host, "cat /var/lib/ecs/ecs.config") == "ECS_LOGLEVEL=debug\nECS_ENABLE_GPU_SUPPORT=true\n"
    assert inside(host, "cat /etc/ecs/ecs.config") == "ECS_LOGLEVEL=info\n"  # the user's file untouched

    result, _ = provision(lab, host, runtime_playbook(tmp_path / "runtime.yml", ("nvidia runtime for Docker",)),
                          tmp_path)
    assert result.code == 0, result.output
    ready, report = provision(lab, host, Path("playbooks/image-finalize.yml"), tmp_path,
                              "--var", "cleanup_categories=[ecs-state]", "--var", "ecs_agent=true")
    assert ready.code == 0, ready.output
    assert [(s["kind"], s["status"]) for s in report["steps"]][:1] == [("ecs_gpu_support", "ok")]  # converged
    assert "GPU support on, Docker runtime nvidia" in ready.output + str(report)
