"""gpunode's AWS Batch files accepted by a moto server as written, and what Batch needs refused (exit 2) when missing.

The files come from `write_batch_files`, the writer `build-ami` and `bake` call after the AMI exists; each is loaded
and handed to boto3 unmodified (`aws ... --cli-input-json file://F`), in the user's order: launch template,
compute environment, job queue, job definition, job. The end-to-end run through `build-ami` on a lab host is
tests/test_seed_004.py.
"""

from __future__ import annotations

import base64
import json
from email import message_from_bytes
from pathlib import Path

import pytest

from gpunode.image.batch import BatchRequest, write_batch_files
from gpunode.image.mime import is_mime_archive, mime_archive
from gpunode.image.outputs import JobSpec, launch_template
from tests.batch_support import client, listed_jobs, network_options, submit_all, user_network
from tests.conftest import run_cli
from tests.image_support import moto_server
from tests.test_image_aws_json import problems

NAME = "gpunode-base-al2023-ecs-gpu-20261128"
SCRIPT = "#!/bin/bash\necho 'gpunode first boot'\n"


def _files(tmp_path: Path) -> dict[str, Path]:
    return {command: tmp_path / f"{command}.json" for command in (
        "create-launch-template", "create-compute-environment", "create-job-queue", "register-job-definition",
        "submit-job")}


def test_the_five_files_as_written_are_accepted_and_the_job_is_listed(tmp_path: Path) -> None:
    files = _files(tmp_path)
    with moto_server() as endpoint:
        network = user_network(endpoint)
        image_id = client(endpoint, "ec2").describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
        request = BatchRequest(str(files["create-launch-template"]), str(files["create-compute-environment"]),
                               str(files["create-job-queue"]), str(files["register-job-definition"]),
                               str(files["submit-job"]), [network["subnet"]], [network["security_group"]],
                               network["instance_role"], network["service_role"],
                               job_spec=JobSpec.parse("nvidia/cuda:12.4.1-base-ubuntu22.04", "nvidia-smi -L", 1))
        user_data = request.user_data = mime_archive([("shell", SCRIPT)])
        request.check()
        template = launch_template(image_id, NAME, "g5.xlarge", {"Name": NAME}, root_device="/dev/xvda",
                                   user_data=user_data)
        written = write_batch_files(request, image_id, NAME, "g5.xlarge", "ECS_AL2023_NVIDIA", template)
        assert written == list(files.values())  # every file, in submission order

        answers = submit_all(endpoint, files)
        assert answers["submit-job"]["jobName"] == NAME
        batch, ec2 = client(endpoint, "batch"), client(endpoint, "ec2")

        (environment,) = batch.describe_compute_environments(computeEnvironments=[NAME])["computeEnvironments"]
        resources = environment["computeResources"]
        assert resources["subnets"] == [network["subnet"]] and resources["securityGroupIds"] == [
            network["security_group"]]
        assert resources["instanceRole"] == "ecsInstanceRole" and environment["serviceRole"] == network["service_role"]
        assert resources["launchTemplate"] == {"launchTemplateName": NAME, "version": "$Default"}
        assert resources["ec2Configuration"] == [{"imageType": "ECS_AL2023_NVIDIA", "imageIdOverride": image_id}]
        # the template the environment names is the one EC2 holds, with the AMI and the MIME user data
        (version,) = ec2.describe_launch_template_versions(LaunchTemplateName=NAME,
                                                           Versions=["$Default"])["LaunchTemplateVersions"]
        data = version["LaunchTemplateData"]
        assert data["ImageId"] == image_id
        archive = message_from_bytes(base64.b64decode(data["UserData"]))
        assert [part.get_content_type() for part in archive.walk()] == ["multipart/mixed", "text/x-shellscript"]
        assert archive.get_payload()[0].get_payload(decode=True).decode() == SCRIPT

        (queue,) = batch.describe_job_queues(jobQueues=[NAME])["jobQueues"]
        (entry,) = queue["computeEnvironmentOrder"]  # moto keeps the name given, AWS answers the ARN
        assert entry["computeEnvironment"] in (NAME, environment["computeEnvironmentArn"])
        (definition,) = batch.describe_job_definitions(jobDefinitionName=NAME)["jobDefinitions"]
        assert {"type": "GPU", "value": "1"} in definition["containerProperties"]["resourceRequirements"]
        assert [job["jobName"] for job in listed_jobs(endpoint, NAME)] == [NAME]
    for (service, operation), path in zip((("ec2", "CreateLaunchTemplate"), ("batch", "CreateComputeEnvironment"),
                                           ("batch", "CreateJobQueue"), ("batch", "RegisterJobDefinition"),
                                           ("batch", "SubmitJob")), files.values(), strict=True):
        assert problems(service, operation, json.loads(path.read_text())) == "", path  # botocore's shapes too


@pytest.mark.parametrize(("leave_out", "named"), [
    ("--subnet", "--subnet"), ("--security-group", "--security-group"), ("--instance-role", "--instance-role"),
    ("--launch-template", "--launch-template")])
def test_a_compute_environment_without_what_batch_needs_is_exit_2(tmp_path: Path, leave_out: str, named: str) -> None:
    network = {"subnet": "subnet-0abc", "security_group": "sg-0abc", "instance_role": "ecsInstanceRole",
               "service_role": "arn:aws:iam::123456789012:role/AWSBatchServiceRole"}
    options = [*network_options(network), "--launch-template", str(tmp_path / "lt.json")]
    index = options.index(leave_out)
    del options[index:index + 2]
    result = run_cli("build-ami", "--base", "al2023-ecs-gpu", "--batch", str(tmp_path / "ce.json"), *options,
                     env={"GPUNODE_BUILDS": str(tmp_path / "builds")})
    assert result.code == 2, result.output
    assert f"--batch (an EC2 compute environment) needs {named}" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "builds").exists()  # refused before anything started


def test_plain_user_data_for_a_batch_template_and_a_job_without_a_queue_are_exit_2(tmp_path: Path) -> None:
    network = {"subnet": "subnet-0abc", "security_group": "sg-0abc", "instance_role": "ecsInstanceRole",
               "service_role": "arn:aws:iam::123456789012:role/AWSBatchServiceRole"}
    plain = tmp_path / "user-data.sh"
    plain.write_text(SCRIPT)
    result = run_cli("build-ami", "--base", "al2023-ecs-gpu", "--batch", str(tmp_path / "ce.json"),
                     "--launch-template", str(tmp_path / "lt.json"), "--user-data", str(plain),
                     *network_options(network), env={"GPUNODE_BUILDS": str(tmp_path / "builds")})
    assert result.code == 2 and "MIME multi-part archive" in result.output and "--format mime" in result.output
    job = run_cli("bake", "root@10.0.0.1", "--name", "x", "--batch-job", str(tmp_path / "job.json"))
    assert job.code == 2 and "--batch-job needs --batch-job-queue" in job.output, job.output
    bad = run_cli("user-data", "--format", "xml")
    assert bad.code == 2 and "--format must be shell, cloud-init or mime" in bad.output


def test_the_mime_archive_holds_the_script_as_a_shell_part() -> None:
    archive = mime_archive([("shell", SCRIPT), ("cloud-init", "#cloud-config\nruncmd: [[true]]\n")])
    assert is_mime_archive(archive) and not is_mime_archive(SCRIPT) and not is_mime_archive("#cloud-config\n{}\n")
    parts = [p for p in message_from_bytes(archive.encode()).walk() if not p.is_multipart()]
    assert [(p.get_content_type(), p.get_filename()) for p in parts] == [
        ("text/x-shellscript", "gpunode-1-shell"), ("text/cloud-config", "gpunode-2-cloud-init")]
    assert parts[0].get_payload(decode=True).decode() == SCRIPT
    with pytest.raises(ValueError, match="contains the MIME boundary"):
        mime_archive([("shell", "#!/bin/sh\necho ==GPUNODE-USER-DATA==\n")])
