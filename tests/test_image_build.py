"""`build-ami` end to end: real Packer (amazon-ebs) against a local moto_server, gpunode provisioning a lab host.

moto plays EC2 (key pair, instance, AMI, tags); the build instance Packer and gpunode connect to is a lab host
(ssh_host), so the real playbook, cleanup and validation run on a real machine.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpunode.image.mime import mime_archive
from gpunode.image.outputs import batch_compute_environment
from gpunode.playbook import load_playbook
from tests.batch_support import cli_input_json, network_options, user_network
from tests.conftest import REPO, run_cli
from tests.image_support import (
    AWS_ENV,
    REBOOT_PLAYBOOK,
    ec2_client,
    live_instances,
    moto_server,
    own_images,
    require_packer,
)
from tests.test_image_aws_json import problems
from tests.test_image_lab import ECS_AGENT

pytestmark = pytest.mark.lab


@pytest.fixture
def moto():
    require_packer()
    with moto_server() as endpoint:
        yield endpoint


def build_ami(endpoint: str, host, key: Path, user: str, playbook: str, builds: Path, *extra: str,
              base: str = "al2023"):
    env = {**AWS_ENV, "GPUNODE_BUILDS": str(builds)}
    return run_cli("build-ami", "--endpoint", endpoint, "--base", base, "--playbook", playbook,
                   "--ssh-key", str(key), "--packer-var", f"ssh_host={host.address}",
                   "--packer-var", f"ssh_username={user}", *extra, env=env, timeout=900)


def test_build_ami_provisions_cleans_validates_and_tags(lab, fresh_host, moto, tmp_path: Path) -> None:
    template, batch, job = tmp_path / "launch-template.json", tmp_path / "batch.json", tmp_path / "job.json"
    assert fresh_host.run_inside(ECS_AGENT).returncode == 0  # the ECS-optimized AMI's agent (base al2023-ecs)
    first_boot = tmp_path / "user-data.mime"  # Batch takes a launch template's user data only as MIME multi-part
    first_boot.write_text(mime_archive([("shell", "#!/bin/bash\necho 'first boot'\n")]))
    network = user_network(moto)
    result = build_ami(moto, fresh_host, lab.key_path, "gpunode", "playbooks/base.yml", tmp_path / "builds",
                       "--launch-template", str(template), "--user-data", str(first_boot),
                       "--batch", str(batch), "--name", "gpunode-test-image",
                       "--batch-job-definition", str(job), "--job-image", "nvidia/cuda:12.4.1-base-ubuntu22.04",
                       "--job-command", "nvidia-smi -L", *network_options(network), base="al2023-ecs")
    assert result.code == 0, result.output
    # Packer's output streamed through, gpunode's own lines inside it
    assert "amazon-ebs.gpu-node: gpunode: provision:" in result.output
    assert "Creating AMI gpunode-test-image" in result.output

    ec2 = ec2_client(moto)
    (image,) = own_images(ec2)
    tags = {t["Key"]: t["Value"] for t in image["Tags"]}
    assert tags["Name"] == "gpunode-test-image"  # a Debian lab host stood in for the al2023-ecs instance: said so
    assert tags["gpunode:base"] == "al2023-ecs (source AMI; provisioned: debian-12, a stand-in)"
    assert tags["gpunode:stand-in"] == "true" and "a stand-in" in result.output
    assert tags["gpunode:playbook-sha256"] == load_playbook(REPO / "playbooks" / "base.yml").sha256
    assert tags["gpunode:driver"] == "none" and tags["gpunode:os"] == "debian-12"
    assert tags["gpunode:verify"] == "not run: no NVIDIA GPU on the instance"
    snapshot = image["BlockDeviceMappings"][0]["Ebs"]["SnapshotId"]
    snap_tags = {t["Key"] for t in ec2.describe_snapshots(SnapshotIds=[snapshot])["Snapshots"][0]["Tags"]}
    assert {"gpunode:driver", "gpunode:playbook-sha256"} <= snap_tags
    assert live_instances(ec2) == []  # Packer terminated the build instance
    assert not [k for k in ec2.describe_key_pairs()["KeyPairs"] if k["KeyName"].startswith("gpunode-build-")]

    # the playbook really ran, then cleanup, on the host
    assert fresh_host.run_inside("grep -c '^SystemMaxUse=1G' /etc/systemd/journald.conf").stdout.strip() == "1"
    assert fresh_host.run_inside("wc -c < /etc/machine-id").stdout.strip() == "0"
    assert "AAAA" not in fresh_host.run_inside("cat /home/gpunode/.ssh/authorized_keys 2>/dev/null").stdout

    (build_dir,) = (tmp_path / "builds").iterdir()
    report = json.loads((build_dir / "report.json").read_text())
    assert report["ok"] and report["phase"] == "done"
    assert (build_dir / "packer_key").read_text().strip() == ""  # gpunode had its key: Packer's copy not kept
    finalize = [(s["kind"], s["status"]) for s in report["runs"]["finalize"]["hosts"][0]["steps"]]
    # no driver: GPU support not needed; no acceptance program on the host: no boot unit (accept_at_boot auto); no
    # power-off
    assert finalize == [("ecs_gpu_support", "ok"), ("accept_at_boot", "ok"), ("image_cleanup", "changed"),
                        ("image_validate", "ok"), ("command", "skipped")]
    assert fresh_host.run_inside("ls -A /var/lib/ecs/data").stdout.strip() == ""  # agent state not baked in

    # the optional outputs are valid requests: moto accepts the launch template, botocore's model the Batch one
    created = ec2.create_launch_template(**json.loads(template.read_text()))["LaunchTemplate"]
    data = ec2.describe_launch_template_versions(LaunchTemplateId=created["LaunchTemplateId"])
    assert data["LaunchTemplateVersions"][0]["LaunchTemplateData"]["ImageId"] == image["ImageId"]
    user_data = data["LaunchTemplateVersions"][0]["LaunchTemplateData"]["UserData"]
    assert base64.b64decode(user_data).decode() == first_boot.read_text()
    _validate_batch_requests(json.loads(batch.read_text()), json.loads(job.read_text()), image["ImageId"], network)
    # moto's Batch accepts the compute environment and the job definition as written
    cli_input_json(moto, "batch", "create-compute-environment", batch)
    cli_input_json(moto, "batch", "register-job-definition", job)


def _validate_batch_requests(environment: dict, job: dict, image_id: str, network: dict) -> None:
    assert problems("batch", "CreateComputeEnvironment", environment) == ""
    assert environment["computeResources"]["ec2Configuration"] == [
        {"imageType": "ECS_AL2023_NVIDIA", "imageIdOverride": image_id}]
    expected = batch_compute_environment(image_id, "gpunode-test-image", ["g5.xlarge"], subnets=[network["subnet"]],
                                         security_groups=[network["security_group"]],
                                         instance_role=network["instance_role"], image_type="ECS_AL2023_NVIDIA")
    expected["computeResources"]["launchTemplate"] = {"launchTemplateName": "gpunode-test-image",
                                                      "version": "$Default"}
    assert environment == {**expected, "serviceRole": network["service_role"]}
    assert problems("batch", "RegisterJobDefinition", job) == ""
    assert job["containerProperties"]["command"] == ["nvidia-smi", "-L"]
    assert job["tags"] == {"gpunode:image": image_id}


def test_a_failing_step_fails_the_build_and_leaves_nothing(lab, fresh_host, moto, tmp_path: Path) -> None:
    playbook = tmp_path / "failing.yml"
    playbook.write_text("name: failing\nsteps:\n  - name: a harmless first step\n    command: {cmd: 'true'}\n"
                        "  - name: the step that breaks\n    command: {cmd: \"echo 'disk on fire' >&2; exit 3\"}\n")
    result = build_ami(moto, fresh_host, lab.key_path, "root", str(playbook), tmp_path / "builds")
    assert result.code == 1, result.output
    assert "the image build failed at step 'the step that breaks' (provision)" in result.output
    assert "disk on fire" in result.output and "no image was made" in result.output
    ec2 = ec2_client(moto)
    assert own_images(ec2) == [] and live_instances(ec2) == []
    (build_dir,) = (tmp_path / "builds").iterdir()
    report = json.loads((build_dir / "report.json").read_text())
    assert report["failed_step"] == "the step that breaks" and not report["ok"]
    # the host was not cleaned: the build stopped at the failing step
    assert fresh_host.run_inside("test -s /etc/machine-id && echo kept").stdout.strip() == "kept"



def test_a_reboot_during_provisioning_is_survived(lab, fresh_host, moto, tmp_path: Path) -> None:
    playbook = tmp_path / "reboots.yml"
    playbook.write_text(REBOOT_PLAYBOOK)
    result = build_ami(moto, fresh_host, lab.key_path, "gpunode", str(playbook), tmp_path / "builds",
                       "--packer-var", "save_packer_key=true")
    assert result.code == 0, result.output
    # the template hands Packer's key over through a 0600 file (what alicloud/tencent builds rely on)
    (build_dir,) = (tmp_path / "builds").iterdir()
    packer_key = build_dir / "packer_key"
    assert packer_key.read_text().strip() == lab.key_path.read_text().strip()
    assert packer_key.stat().st_mode & 0o777 == 0o600
    before, after = fresh_host.run_inside("cat /root/boot-before /root/boot-after").stdout.split()
    assert before != after  # really rebooted, gpunode reconnected (same host key, per-build known_hosts)
    assert len(own_images(ec2_client(moto))) == 1


def test_verify_gpu_must_pass_when_asked(lab, fresh_host, moto, tmp_path: Path) -> None:
    playbook = tmp_path / "tiny.yml"
    playbook.write_text("name: tiny\nsteps:\n  - command: {cmd: 'true'}\n")
    result = build_ami(moto, fresh_host, lab.key_path, "root", str(playbook), tmp_path / "builds",
                       "--verify", "always")
    assert result.code == 1, result.output
    assert "failed at step 'verify-gpu'" in result.output and "no-nvidia-gpu" in result.output
    ec2 = ec2_client(moto)
    assert own_images(ec2) == [] and live_instances(ec2) == []


def test_ctrl_c_cancels_the_build_and_packer_cleans_up(lab, fresh_host, moto, tmp_path: Path) -> None:
    playbook = tmp_path / "slow.yml"
    playbook.write_text("name: slow\nsteps:\n  - command: {cmd: 'sleep 120'}\n")
    args = [sys.executable, "-m", "gpunode", "build-ami", "--endpoint", moto, "--base", "al2023", "--playbook",
            str(playbook), "--ssh-key", str(lab.key_path), "--packer-var", f"ssh_host={fresh_host.address}",
            "--packer-var", "ssh_username=root"]
    env = {**os.environ, **AWS_ENV, "GPUNODE_BUILDS": str(tmp_path / "builds")}
    proc = subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)  # its own process group, as a terminal's Ctrl-C would reach
    output = []
    assert proc.stdout is not None
    for line in proc.stdout:
        output.append(line)
        if "gpunode: provision:" in line:
            time.sleep(2)
            os.killpg(proc.pid, signal.SIGINT)
    assert proc.wait(timeout=120) == 1
    text = "".join(output)
    assert "the build was interrupted (Ctrl-C); Packer cleaned up the build instance" in text
    ec2 = ec2_client(moto)
    assert own_images(ec2) == [] and live_instances(ec2) == []
    assert not [k for k in ec2.describe_key_pairs()["KeyPairs"] if k["KeyName"].startswith("gpunode-build-")]
