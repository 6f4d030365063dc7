"""Optional outputs that use a new AMI: an EC2 launch template and an AWS Batch compute environment.

Both are request bodies for `aws ... --cli-input-json file://...` (and for boto3's matching calls).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpunode.image.tags import as_aws


def launch_template(image_id: str, name: str, instance_type: str, tags: dict[str, str],
                    volume_gb: int = 100, root_device: str = "/dev/sda1") -> dict[str, Any]:
    """ec2 create-launch-template input: the AMI, the GPU instance type, IMDSv2, tagged instances and volumes."""
    return {
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


def batch_compute_environment(image_id: str, name: str, instance_types: list[str], max_vcpus: int = 256,
                              subnets: list[str] | None = None, security_groups: list[str] | None = None,
                              instance_role: str = "ecsInstanceRole") -> dict[str, Any]:
    """batch create-compute-environment input: a managed EC2 environment whose GPU instances boot this AMI.

    AWS Batch starts jobs through the ECS agent: the image must run it (the ECS-optimized GPU AMI does; a bare
    Ubuntu/Debian base needs the agent added by the playbook). Subnets and security groups are the user's.
    """
    return {
        "computeEnvironmentName": name,
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
            "ec2Configuration": [{"imageType": "ECS_AL2_NVIDIA", "imageIdOverride": image_id}],
            "tags": {"gpunode:image": image_id},
        },
    }


def write_json(data: dict[str, Any], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path
