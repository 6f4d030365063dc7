"""Base images per cloud: how to find them, who logs in, the root device."""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpunode.errors import UsageError
from gpunode.vendor_aws import fact

CANONICAL, AMAZON = fact("canonical_owner"), fact("al2023_owner")
# Debian's AWS account for release AMIs: widely used, but no Debian-authored page or file stating it was reachable
# with the search tools (the cloud team's code names no account); re-check it against wiki.debian.org/Cloud.
DEBIAN = "136693071363"


@dataclass(frozen=True)
class AwsBase:
    name_filter: str
    owners: tuple[str, ...]
    ssh_username: str
    root_device: str
    ecs_agent: bool = False             # the base ships the ECS agent (what AWS Batch starts jobs through)
    batch_image_type: str = fact("image_type_al2023_gpu")  # Ec2Configuration.imageType of a Batch compute environment
    ssm_parameter: str = ""             # AWS's public SSM parameter naming the current AMI (preferred over the filter)


def debian_ami_filter(release: int) -> str:
    """Debian's release AMIs of one release (not its daily or backports images), from Debian's cloud image code."""
    return fact("debian_name").format(release=release)


def al2023_ami_filter() -> str:
    """The plain AL2023 AMIs of AWS's default kernel line (6.1), not the minimal ones."""
    return fact("al2023_name").format(kernel=fact("al2023_kernel"))


def ecs_ami_filter(gpu: bool) -> str:
    """The name filter of the ECS-optimized AL2023 AMIs, from aws/amazon-ecs-ami's templates (any release date)."""
    template = fact("ecs_gpu_ami_name" if gpu else "ecs_ami_name")
    return template.format(prefix=fact("ecs_ami_name_prefix"), version="*", kernel=fact("ecs_ami_kernel"))


AWS_BASES = {
    "ubuntu-22.04": AwsBase(fact("ubuntu_jammy_name"), (CANONICAL,), "ubuntu", "/dev/sda1"),
    "ubuntu-24.04": AwsBase(fact("ubuntu_noble_name"), (CANONICAL,), "ubuntu", "/dev/sda1"),
    "al2023": AwsBase(al2023_ami_filter(), (AMAZON,), "ec2-user", "/dev/xvda"),
    # The ECS-optimized AL2023 AMIs (ECS agent, Docker, containerd): what AWS Batch instances run. The GPU one also
    # carries NVIDIA's driver and container toolkit as AWS ships them.
    "al2023-ecs": AwsBase(ecs_ami_filter(gpu=False), (fact("ecs_ami_owner"),), "ec2-user", "/dev/xvda",
                          ecs_agent=True, ssm_parameter=fact("ssm_ecs_al2023")),
    "al2023-ecs-gpu": AwsBase(ecs_ami_filter(gpu=True), (fact("ecs_ami_owner"),), "ec2-user", "/dev/xvda",
                              ecs_agent=True, ssm_parameter=fact("ssm_ecs_al2023_gpu")),
    "debian-12": AwsBase(debian_ami_filter(12), (DEBIAN,), "admin", "/dev/xvda"),
    "debian-13": AwsBase(debian_ami_filter(13), (DEBIAN,), "admin", "/dev/xvda"),
}
# Alibaba Cloud and Tencent Cloud need the base image id (`--source-image`); the base picks the login user.
# Alibaba Cloud Linux 3 and TencentOS Server 3 are the clouds' own OS for ACK and TKE node pools (root logs in).
ALICLOUD_USERS = {"ubuntu-22.04": "root", "ubuntu-24.04": "root", "debian-12": "root", "alinux-3": "root"}
TENCENT_USERS = {"ubuntu-22.04": "ubuntu", "ubuntu-24.04": "ubuntu", "debian-12": "root", "tencentos-3": "root",
                 "tencentos-4": "root"}
QEMU_USERS = {"ubuntu-22.04": "ubuntu", "ubuntu-24.04": "ubuntu", "debian-12": "debian"}


def tencent_image_name(base: str) -> str | None:
    """Without --source-image, the tencentcloud builder's source_image_name (a regular expression over image names)
    for TencentOS: the names Tencent gives its public images (gpunode/image/cloud_facts.py TENCENTCLOUD)."""
    from gpunode.image.cloud_facts import TENCENTCLOUD

    key = {"tencentos-3": "tencentos_3", "tencentos-4": "tencentos_4"}.get(base)
    if not key:
        return None
    return "^" + re.escape(TENCENTCLOUD[key].value).replace("\\ ", " ") + r"\b"  # RE2 (Go), like Python's here


def alicloud_image_family(base: str) -> str | None:
    """Without --source-image, the alicloud plugin's image_family (1.7+ only): Alibaba's public image families."""
    from gpunode.image.cloud_facts import ALICLOUD

    key = {"alinux-3": "family_alinux_3", "ubuntu-22.04": "family_ubuntu_22_04",
           "ubuntu-24.04": "family_ubuntu_24_04"}.get(base)
    return ALICLOUD[key].value if key else None


def aws_base(base: str) -> AwsBase:
    try:
        return AWS_BASES[base]
    except KeyError:
        raise UsageError(f"unknown base {base!r} for AWS", fix=f"use one of: {', '.join(AWS_BASES)}") from None


def batch_image_type(os_id: str) -> str:
    """The Batch imageType for an image whose /etc/os-release is `ID-VERSION_ID` (bake: the base is not known).

    ECS_AL2023_NVIDIA serves every non-Graviton GPU instance type (botocore's Batch model), so every image gets it
    but Amazon Linux 2 itself (whose ECS AMIs ended on June 30, 2026).
    """
    if os_id in ("amzn-2", "amzn-2.0"):
        return fact("image_type_al2_gpu")
    return fact("image_type_al2023_gpu")


def other_base(builder: str, base: str) -> str:
    """The login user of a base on another builder."""
    table = {"alicloud": ALICLOUD_USERS, "tencent": TENCENT_USERS, "qemu": QEMU_USERS}[builder]
    if base not in table:
        raise UsageError(f"base {base!r} is not available for {builder}", fix=f"use one of: {', '.join(table)}")
    return table[base]
