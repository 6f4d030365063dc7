"""What an image builder needs of a distro's base image on each cloud: the AMI filter and owner, who logs in, the
public image family or name (keys of gpunode/image/cloud_facts.py's tables)."""

from __future__ import annotations

from dataclasses import dataclass

from gpunode.vendor_aws import fact


@dataclass(frozen=True)
class AwsBase:
    name_filter: str
    owners: tuple[str, ...]
    ssh_username: str
    root_device: str
    ecs_agent: bool = False             # the base ships the ECS agent (what AWS Batch starts jobs through)
    batch_image_type: str = fact("image_type_al2023_gpu")  # Ec2Configuration.imageType of a Batch compute environment
    ssm_parameter: str = ""             # AWS's public SSM parameter naming the current AMI (preferred over the filter)


@dataclass(frozen=True)
class ImageBase:
    """One `--base` name across the builders; None where a builder does not offer it."""

    aws: AwsBase | None = None
    alicloud_user: str | None = None
    tencent_user: str | None = None
    qemu_user: str | None = None
    alicloud_family_key: str | None = None   # key of cloud_facts.ALICLOUD: the public image family
    tencent_name_key: str | None = None      # key of cloud_facts.TENCENTCLOUD: the public image name
    alicloud_example: str | None = None      # an Alibaba public image id of this kind (for messages)
