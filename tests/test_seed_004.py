"""docs/seeds/004-aws-batch.md: its commands run in order, offline, and every artefact goes to its consumer.

The commands are read from the page's bash block. `gpunode` lines run as written, in a scratch folder, with the
offline stand-ins added to `build-ami` (a moto server for EC2, a lab host for the instance, moto's AMI as the
source); the placeholders for the user's subnet and security group become moto's. Each `aws ... --cli-input-json
file://F` is boto3's call with F's JSON unmodified; `aws s3 cp` is skipped (nothing reads the bucket offline).
"""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
import subprocess
import sys
from email import message_from_bytes
from pathlib import Path

import pytest

from tests.batch_support import cli_input_json, client, listed_jobs, user_network
from tests.conftest import REPO
from tests.image_support import AWS_ENV, moto_server, own_images, require_packer
from tests.test_image_aws_json import problems
from tests.test_image_lab import ECS_AGENT
from tests.test_user_data_mime_lab import INSTALL_CLOUD_INIT, SPLIT

pytestmark = pytest.mark.lab
PAGE = REPO / "docs" / "seeds" / "004-aws-batch.md"
OPERATIONS = {"create-launch-template": "CreateLaunchTemplate", "create-compute-environment":
              "CreateComputeEnvironment", "create-job-queue": "CreateJobQueue",
              "register-job-definition": "RegisterJobDefinition", "submit-job": "SubmitJob"}


def page_commands() -> list[list[str]]:
    """The page's commands, in order (the first bash block, comments left out)."""
    block = re.search(r"```bash\n(.*?)```", PAGE.read_text(), re.S).group(1)
    return [shlex.split(line) for line in block.splitlines() if line.strip() and not line.startswith("#")]


def test_the_page_lists_the_guides_steps_in_order() -> None:
    words = [" ".join(c[:2]) if c[0] == "gpunode" else " ".join(c[:3]) for c in page_commands()]
    assert words == ["gpunode user-data", "aws s3 cp", "gpunode build-ami", "aws ec2 create-launch-template",
                     "aws batch create-compute-environment", "aws batch create-job-queue",
                     "aws batch register-job-definition", "aws batch submit-job", "aws batch list-jobs"]


def _gpunode(args: list[str], cwd: Path, env: dict[str, str]) -> str:
    result = subprocess.run([sys.executable, "-m", "gpunode", *args], cwd=cwd, capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200", **env}, timeout=1200)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    return result.stdout + result.stderr


def test_the_seed_004_page_runs_and_batch_accepts_what_it_wrote(lab, fresh_host, tmp_path: Path) -> None:
    require_packer()
    assert fresh_host.run_inside(ECS_AGENT).returncode == 0  # the ECS GPU AMI's agent, on the stand-in host
    with moto_server() as moto:
        network = user_network(moto)
        source = client(moto, "ec2").describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
        places = {"subnet-0123456789abcdef0": network["subnet"], "sg-0123456789abcdef0": network["security_group"],
                  "arn:aws:iam::123456789012:role/AWSBatchServiceRole": network["service_role"]}
        env = {**AWS_ENV, "GPUNODE_BUILDS": str(tmp_path / "builds")}
        outputs, queue = {}, None
        for command in page_commands():
            command = [places.get(word, word) for word in command]
            if command[:2] == ["gpunode", "build-ami"]:
                command += ["--endpoint", moto, "--source-ami", source, "--ssh-key", str(lab.key_path),
                            "--packer-var", f"ssh_host={fresh_host.address}", "--packer-var", "ssh_username=gpunode"]
            if command[0] == "gpunode":
                outputs[command[1]] = _gpunode(command[1:], tmp_path, env)
            elif command[:3] == ["aws", "s3", "cp"]:
                continue
            elif command[2] == "list-jobs":
                queue = command[command.index("--job-queue") + 1]
            else:
                (path,) = [word.removeprefix("file://") for word in command if word.startswith("file://")]
                assert problems(command[1], OPERATIONS[command[2]], json.loads((tmp_path / path).read_text())) == ""
                cli_input_json(moto, command[1], command[2], tmp_path / path)

        assert [job["jobName"] for job in listed_jobs(moto, queue)] == ["tf-train-gpu"]
        ec2, batch = client(moto, "ec2"), client(moto, "batch")
        (image,) = own_images(ec2)
        tags = {t["Key"]: t["Value"] for t in image["Tags"]}
        assert tags["gpunode:base"] == "al2023-ecs-gpu (source AMI; provisioned: debian-12, a stand-in)"
        (environment,) = batch.describe_compute_environments(computeEnvironments=["tf-train-gpu"])[
            "computeEnvironments"]
        resources = environment["computeResources"]
        assert resources["launchTemplate"] == {"launchTemplateName": "tf-train-gpu", "version": "$Default"}
        assert resources["ec2Configuration"] == [{"imageType": "ECS_AL2023_NVIDIA",
                                                  "imageIdOverride": image["ImageId"]}]
        assert (resources["subnets"], resources["securityGroupIds"]) == ([network["subnet"]],
                                                                          [network["security_group"]])
        (definition,) = batch.describe_job_definitions(jobDefinitionName="tf-train-gpu")["jobDefinitions"]
        assert definition["containerProperties"]["command"] == ["python", "train.py", "--epochs", "10"]
        assert {"type": "GPU", "value": "1"} in definition["containerProperties"]["resourceRequirements"]
        (version,) = ec2.describe_launch_template_versions(LaunchTemplateName="tf-train-gpu")["LaunchTemplateVersions"]
        user_data = base64.b64decode(version["LaunchTemplateData"]["UserData"])
    assert user_data == (tmp_path / "user-data.mime").read_bytes() and len(user_data) < 16 * 1024
    assert [p.get_content_type() for p in message_from_bytes(user_data).walk()] == ["multipart/mixed",
                                                                                     "text/x-shellscript"]
    assert (tmp_path / "bundle.tar.xz").stat().st_size > 0
    assert "a stand-in" in outputs["build-ami"]

    # the launch template's user data, as EC2 holds it, split by Debian's cloud-init on the host
    installed = fresh_host.run_inside(INSTALL_CLOUD_INIT, timeout=600)
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    (fresh_host.root / "root" / "user-data.mime").write_bytes(user_data)
    (fresh_host.root / "root" / "split.py").write_text(SPLIT)
    split = fresh_host.run_inside("python3 /root/split.py /root/user-data.mime")
    assert split.returncode == 0, split.stderr
    assert json.loads(split.stdout)["parts"] == [["text/x-shellscript", "gpunode-1-shell"]]
