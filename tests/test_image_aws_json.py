"""Every AWS request body gpunode writes, checked offline against botocore's own service models.

botocore.validate.ParamValidator is what boto3 runs before it sends a request: a misspelt or mistyped field fails
here exactly as it would fail `aws ... --cli-input-json` or boto3.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import botocore.session
import pytest
from botocore.validate import ParamValidator

from gpunode.errors import UsageError
from gpunode.image.bases import AWS_BASES, aws_base, batch_image_type
from gpunode.image.outputs import (
    JobSpec,
    batch_compute_environment,
    batch_job_definition,
    launch_template,
    read_user_data,
    write_json,
)
from tests.conftest import run_cli

SESSION = botocore.session.get_session()
IMAGE = "ami-0123456789abcdef0"
TAGS = {"Name": "gpunode-gpu-node-ubuntu-22.04-x", "gpunode:driver": "550.127.05"}


def problems(service: str, operation: str, request: dict) -> str:
    """ParamValidator's report for one request ('' when botocore would send it)."""
    shape = SESSION.get_service_model(service).operation_model(operation).input_shape
    report = ParamValidator().validate(request, shape)
    return report.generate_report() if report.has_errors() else ""


def documented_image_types() -> set[str]:
    """Ec2Configuration.imageType is a plain string in the model; its documentation lists the values Batch takes."""
    shape = SESSION.get_service_model("batch").shape_for("Ec2Configuration").members["imageType"]
    return set(re.findall(r"\b(?:ECS|EKS)_[A-Z0-9_]+\b", shape.documentation))


def test_the_launch_template_is_a_valid_create_launch_template_request(tmp_path: Path) -> None:
    for base in AWS_BASES.values():
        request = launch_template(IMAGE, "gpunode-gpu-node-ubuntu-22.04-x", "g5.xlarge", TAGS,
                                  root_device=base.root_device)
        written = json.loads(write_json(request, tmp_path / "lt.json").read_text())
        assert problems("ec2", "CreateLaunchTemplate", written) == ""
        assert "UserData" not in written["LaunchTemplateData"]
    script = "#!/bin/bash\necho first boot\n"
    with_user_data = launch_template(IMAGE, "x", "g5.xlarge", TAGS, user_data=script)
    assert problems("ec2", "CreateLaunchTemplate", with_user_data) == ""
    assert base64.b64decode(with_user_data["LaunchTemplateData"]["UserData"]).decode() == script


def test_user_data_over_ec2s_limit_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "user-data.sh"
    big.write_text("#!/bin/bash\n" + "#" * 20000 + "\n")
    result = run_cli("build-ami", "--launch-template", str(tmp_path / "lt.json"), "--user-data", str(big),
                     env={"GPUNODE_BUILDS": str(tmp_path / "builds")})
    assert result.code == 2 and "EC2 takes at most 16384 bytes" in result.output and "--bundle-url" in result.output
    with pytest.raises(UsageError, match="cannot read the user data"):
        read_user_data(str(tmp_path / "missing.sh"))


@pytest.mark.parametrize("base", sorted(AWS_BASES))
def test_the_compute_environment_is_valid_and_its_image_type_follows_the_base(base: str, tmp_path: Path) -> None:
    request = batch_compute_environment(IMAGE, f"gpunode-gpu-node-{base}-20261123", ["g5.xlarge", "g6.xlarge"],
                                        image_type=aws_base(base).batch_image_type)
    written = json.loads(write_json(request, tmp_path / "ce.json").read_text())
    assert problems("batch", "CreateComputeEnvironment", written) == ""
    image_type = written["computeResources"]["ec2Configuration"][0]["imageType"]
    assert image_type in documented_image_types()
    assert image_type == "ECS_AL2023_NVIDIA"  # every base: AL2 ECS AMIs ended 2026-06-30 (see below)
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,128}", written["computeEnvironmentName"])  # "22.04" is not a Batch name


def test_bake_picks_the_image_type_from_the_os() -> None:
    """botocore's Batch model (batch/2016-08-10/service-2.json, Ec2Configuration.imageType; vendor_aws.AWS_BATCH):
    ECS_AL2023_NVIDIA serves all non-Graviton GPU instance types, ECS AL2 AMIs ended on June 30, 2026. Ubuntu and
    Debian images used to get ECS_AL2_NVIDIA."""
    doc = SESSION.get_service_model("batch").shape_for("Ec2Configuration").members["imageType"].documentation
    assert re.search(r"ECS_AL2023_NVIDIA</dt>.*?all non Amazon Web Services Graviton-based instance types", doc)
    assert "June 30, 2026" in doc
    for os_id in ("amzn-2023", "ubuntu-22.04", "ubuntu-24.04", "debian-12", "rhel-9.4", "rocky-9.5"):
        assert batch_image_type(os_id) == "ECS_AL2023_NVIDIA", os_id
    assert batch_image_type("amzn-2") == "ECS_AL2_NVIDIA"  # an Amazon Linux 2 image is still AL2
    assert {batch_image_type("amzn-2023"), batch_image_type("amzn-2")} <= documented_image_types()
    assert batch_compute_environment(IMAGE, "x", ["g5.xlarge"])["computeResources"]["ec2Configuration"][0][
        "imageType"] == "ECS_AL2023_NVIDIA"  # the default too


def test_the_job_definition_is_a_valid_register_job_definition_request(tmp_path: Path) -> None:
    job = JobSpec.parse("nvidia/cuda:12.4.1-base-ubuntu22.04", "python train.py --data '/mnt/data sets'", "2", 8,
                        "30000")
    request = batch_job_definition("gpunode-gpu-node-ubuntu-22.04-x", job, IMAGE)
    written = json.loads(write_json(request, tmp_path / "jd.json").read_text())
    assert problems("batch", "RegisterJobDefinition", written) == ""
    container = written["containerProperties"]
    assert container["command"] == ["python", "train.py", "--data", "/mnt/data sets"]
    assert {r["type"]: r["value"] for r in container["resourceRequirements"]} == \
        {"GPU": "2", "VCPU": "8", "MEMORY": "30000"}
    resource_types = SESSION.get_service_model("batch").shape_for("ResourceType").enum
    assert {r["type"] for r in container["resourceRequirements"]} <= set(resource_types)


def test_a_wrong_field_fails_the_check() -> None:
    job = batch_job_definition("x", JobSpec("busybox", ["true"]))
    job["containerProperties"]["resourceRequirement"] = job["containerProperties"].pop("resourceRequirements")
    assert 'Unknown parameter in containerProperties: "resourceRequirement"' in \
        problems("batch", "RegisterJobDefinition", job)
    env = batch_compute_environment(IMAGE, "x", ["g5.xlarge"])
    env["computeResources"]["maxvCpus"] = "256"  # a string where the model wants an integer
    assert "Invalid type for parameter computeResources.maxvCpus" in \
        problems("batch", "CreateComputeEnvironment", env)
    template = launch_template(IMAGE, "x", "g5.xlarge", TAGS)
    template["LaunchTemplateData"]["MetadataOptions"]["HttpTokens"] = True
    assert "HttpTokens" in problems("ec2", "CreateLaunchTemplate", template)


@pytest.mark.parametrize(("extra", "message"), [
    ((), "--batch-job-definition needs the job's container image"),
    (("--job-image", "busybox", "--job-gpus", "two"), "--job-gpus must be a whole number"),
    (("--job-image", "busybox", "--job-gpus", "0"), "--job-gpus must be at least 1"),
    (("--job-image", "busybox", "--job-command", "python 'unclosed"), "--job-command cannot be split"),
])
def test_bad_job_options_exit_2_before_anything_is_built(extra: tuple[str, ...], message: str,
                                                         tmp_path: Path) -> None:
    result = run_cli("build-ami", "--base", "al2023-ecs", "--batch-job-definition", str(tmp_path / "jd.json"),
                     *extra, env={"GPUNODE_BUILDS": str(tmp_path / "builds")})
    assert result.code == 2, result.output
    assert message in result.output
    assert not (tmp_path / "builds").exists()


def test_aws_builds_without_boto3_name_the_extra(tmp_path: Path) -> None:
    """boto3 is the `aws` extra (pyproject.toml); without it build-ami and bake exit 2 before making anything."""
    hidden = tmp_path / "no-boto3" / "boto3"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text("raise ImportError('hidden by the test')\n")
    env = {"PYTHONPATH": str(hidden.parent), "GPUNODE_BUILDS": str(tmp_path / "builds")}
    for args in (["build-ami", "--base", "al2023-ecs-gpu"], ["bake", "10.0.0.1", "--name", "x"]):
        result = run_cli(*args, env=env)
        assert result.code == 2 and "pip install 'gpunode[aws]'" in result.output, result.output
    assert not (tmp_path / "builds").exists()
    validated = run_cli("build-ami", "--validate-only", env=env)  # never asks for boto3
    assert validated.code == 0 or "packer not found" in validated.output, validated.output


def test_validate_only_leaves_no_empty_builds_folder(tmp_path: Path) -> None:
    """`build-ami --validate-only` left an empty .gpunode/builds/ behind: the folders it made are removed when empty;
    a builds folder that was there before (with another build in it) is kept."""
    made = tmp_path / "new" / ".gpunode" / "builds"
    result = run_cli("build-ami", "--validate-only", env={"GPUNODE_BUILDS": str(made)})
    assert result.code == 0 or "packer" in result.output, result.output
    assert not (tmp_path / "new").exists(), list((tmp_path / "new").rglob("*"))
    kept = tmp_path / "kept"
    (kept / "20260101-000000-abcdef").mkdir(parents=True)
    run_cli("build-ami", "--validate-only", env={"GPUNODE_BUILDS": str(kept)})
    assert [p.name for p in kept.iterdir()] == ["20260101-000000-abcdef"]
