"""Optional outputs that use a new AMI: an EC2 launch template, an AWS Batch compute environment and a Batch job
definition that asks for GPUs.

All are request bodies for `aws ... --cli-input-json file://...` (and for boto3's matching calls).
"""

from __future__ import annotations

import base64
import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpunode.errors import UsageError
from gpunode.image.tags import as_aws

USER_DATA_LIMIT = 16 * 1024  # EC2: user data of at most 16 KB (before base64)


def read_user_data(path: str | None) -> str:
    """The user data file for a launch template (e.g. from `gpunode user-data --bundle-url`); bad -> UsageError."""
    if not path:
        return ""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read the user data {path}: {exc.strerror}", fix="give the file gpunode user-data "
                         "wrote (--output)") from None
    if len(data) > USER_DATA_LIMIT:
        raise UsageError(f"{path} has {len(data)} bytes; EC2 takes at most {USER_DATA_LIMIT} bytes of user data",
                         fix="make it with `gpunode user-data --bundle-url URL --bundle-out FILE` (not embedded)")
    return data.decode()


def launch_template(image_id: str, name: str, instance_type: str, tags: dict[str, str],
                    volume_gb: int = 100, root_device: str = "/dev/sda1", user_data: str = "") -> dict[str, Any]:
    """ec2 create-launch-template input: the AMI, the GPU instance type, IMDSv2, tagged instances and volumes, and
    the first-boot user data when given (base64, as the API wants it)."""
    request: dict[str, Any] = {
        "LaunchTemplateName": name,
        "VersionDescription": f"gpunode image {image_id}",
        "LaunchTemplateData": {
            "ImageId": image_id,
            "InstanceType": instance_type,
            "BlockDeviceMappings": [{"DeviceName": root_device, "Ebs": {
                "VolumeSize": volume_gb, "VolumeType": "gp3", "DeleteOnTermination": True, "Encrypted": True}}],
            "MetadataOptions": {"HttpTokens": "required", "HttpEndpoint": "enabled", "HttpPutResponseHopLimit": 2},
            "TagSpecifications": [{"ResourceType": kind, "Tags": as_aws(tags)} for kind in ("instance", "volume")],
        },
        "TagSpecifications": [{"ResourceType": "launch-template", "Tags": as_aws(tags)}],
    }
    if user_data:
        request["LaunchTemplateData"]["UserData"] = base64.b64encode(user_data.encode()).decode()
    return request


def batch_compute_environment(image_id: str, name: str, instance_types: list[str], max_vcpus: int = 256,
                              subnets: list[str] | None = None, security_groups: list[str] | None = None,
                              instance_role: str = "ecsInstanceRole",
                              image_type: str = "ECS_AL2023_NVIDIA") -> dict[str, Any]:
    """batch create-compute-environment input: a managed EC2 environment whose GPU instances boot this AMI.

    AWS Batch starts jobs through the ECS agent: the image must run it (the ECS-optimized GPU AMI does; a bare
    Ubuntu/Debian base needs the agent added by the playbook). Subnets and security groups are the user's.
    `image_type` follows the base (bases.batch_image_type: ECS_AL2023_NVIDIA but for Amazon Linux 2): the values
    botocore's batch model documents for Ec2Configuration.imageType (gpunode/vendor_aws.py).
    """
    return {
        "computeEnvironmentName": batch_name(name),
        "type": "MANAGED",
        "state": "ENABLED",
        "computeResources": {
            "type": "EC2",
            "allocationStrategy": "BEST_FIT_PROGRESSIVE",
            "minvCpus": 0,
            "maxvCpus": max_vcpus,
            "instanceTypes": instance_types,
            "subnets": subnets or [],
            "securityGroupIds": security_groups or [],
            "instanceRole": instance_role,
            "ec2Configuration": [{"imageType": image_type, "imageIdOverride": image_id}],
            "tags": {"gpunode:image": image_id},
        },
    }


@dataclass(frozen=True)
class JobSpec:
    """What a Batch job asks for: the container image and command (the user's), GPUs, vCPUs, memory (MiB)."""

    image: str
    command: list[str]
    gpus: int = 1
    vcpus: int = 4
    memory_mib: int = 16384

    @classmethod
    def parse(cls, image: str | None, command: str | None, gpus: Any = None, vcpus: Any = None,
              memory_mib: Any = None) -> JobSpec:
        """From the CLI: `command` is split like a shell would (no shell runs it); bad input -> UsageError."""
        if not image:
            raise UsageError("--batch-job-definition needs the job's container image",
                             fix="add --job-image, e.g. --job-image nvidia/cuda:12.4.1-base-ubuntu22.04")
        try:
            words = shlex.split(command or "nvidia-smi")
        except ValueError as exc:
            raise UsageError(f"--job-command cannot be split into words: {exc}",
                             fix="quote it as a shell would, e.g. --job-command 'python train.py --epochs 3'") from None
        numbers = {}
        for flag, value, default, low in (("--job-gpus", gpus, cls.gpus, 1), ("--job-vcpus", vcpus, cls.vcpus, 1),
                                          ("--job-memory", memory_mib, cls.memory_mib, 4)):
            try:
                numbers[flag] = default if value in (None, "") else int(value)
            except (TypeError, ValueError):
                raise UsageError(f"{flag} must be a whole number, not {value!r}",
                                 fix=f"e.g. {flag} {default}") from None
            if numbers[flag] < low:
                raise UsageError(f"{flag} must be at least {low}, not {numbers[flag]}", fix=f"e.g. {flag} {default}")
        return cls(image, words, numbers["--job-gpus"], numbers["--job-vcpus"], numbers["--job-memory"])


def batch_name(name: str) -> str:
    """A Batch resource name: up to 128 letters, digits, hyphens and underscores ("22.04" -> "22-04")."""
    return re.sub(r"[^A-Za-z0-9_-]", "-", name)[:128]


def batch_job_definition(name: str, job: JobSpec, image_id: str = "") -> dict[str, Any]:
    """batch register-job-definition input: a container job on EC2 resources asking for GPUs, vCPUs and memory.

    As in AWS Batch's GPU job tutorial: `resourceRequirements` with type GPU (plus VCPU and MEMORY, in MiB); the
    ECS agent exposes that many GPUs to the container.
    """
    return {
        "jobDefinitionName": batch_name(name),
        "type": "container",
        "platformCapabilities": ["EC2"],
        "containerProperties": {
            "image": job.image,
            "command": job.command,
            "resourceRequirements": [{"type": "GPU", "value": str(job.gpus)},
                                     {"type": "VCPU", "value": str(job.vcpus)},
                                     {"type": "MEMORY", "value": str(job.memory_mib)}],
        },
        "tags": {"gpunode:image": image_id} if image_id else {},
    }


def write_json(data: dict[str, Any], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path
