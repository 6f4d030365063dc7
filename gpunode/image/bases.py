"""Base images per cloud: how to find them, who logs in, the root device."""

from __future__ import annotations

from dataclasses import dataclass

from gpunode.errors import UsageError
from gpunode.vendor_aws import fact

CANONICAL, DEBIAN, AMAZON = "099720109477", "136693071363", "amazon"


@dataclass(frozen=True)
class AwsBase:
    name_filter: str
    owners: tuple[str, ...]
    ssh_username: str
    root_device: str
    ecs_agent: bool = False             # the base ships the ECS agent (what AWS Batch starts jobs through)
    batch_image_type: str = fact("image_type_al2023_gpu")  # Ec2Configuration.imageType of a Batch compute environment
    ssm_parameter: str = ""             # AWS's public SSM parameter naming the current AMI (preferred over the filter)


def ecs_ami_filter(gpu: bool) -> str:
    """The name filter of the ECS-optimized AL2023 AMIs, from aws/amazon-ecs-ami's templates (any release date)."""
    template = fact("ecs_gpu_ami_name" if gpu else "ecs_ami_name")
    return template.format(prefix=fact("ecs_ami_name_prefix"), version="*", kernel=fact("ecs_ami_kernel"))


AWS_BASES = {
    "ubuntu-22.04": AwsBase("ubuntu/images/hvm-ssd/ubuntu-jammy-22.04-amd64-server-*", (CANONICAL,), "ubuntu",
                            "/dev/sda1"),
    "ubuntu-24.04": AwsBase("ubuntu/images/hvm-ssd-gp3/ubuntu-noble-24.04-amd64-server-*", (CANONICAL,), "ubuntu",
                            "/dev/sda1"),
    "al2023": AwsBase("al2023-ami-2023.*-kernel-6.1-x86_64", (AMAZON,), "ec2-user", "/dev/xvda"),
    # The ECS-optimized AL2023 AMIs (ECS agent, Docker, containerd): what AWS Batch instances run. The GPU one also
    # carries NVIDIA's driver and container toolkit as AWS ships them.
    "al2023-ecs": AwsBase(ecs_ami_filter(gpu=False), (fact("ecs_ami_owner"),), "ec2-user", "/dev/xvda",
                          ecs_agent=True, ssm_parameter=fact("ssm_ecs_al2023")),
    "al2023-ecs-gpu": AwsBase(ecs_ami_filter(gpu=True), (fact("ecs_ami_owner"),), "ec2-user", "/dev/xvda",
                              ecs_agent=True, ssm_parameter=fact("ssm_ecs_al2023_gpu")),
    "debian-12": AwsBase("debian-12-amd64-*", (DEBIAN,), "admin", "/dev/xvda"),
}
# Alibaba Cloud and Tencent Cloud need the base image id (`--source-image`); the base picks the login user.
# Alibaba Cloud Linux 3 and TencentOS Server 3 are the clouds' own OS for ACK and TKE node pools (root logs in).
ALICLOUD_USERS = {"ubuntu-22.04": "root", "ubuntu-24.04": "root", "debian-12": "root", "alinux-3": "root"}
TENCENT_USERS = {"ubuntu-22.04": "ubuntu", "ubuntu-24.04": "ubuntu", "debian-12": "root", "tencentos-3": "root"}
QEMU_USERS = {"ubuntu-22.04": "ubuntu", "ubuntu-24.04": "ubuntu", "debian-12": "debian"}


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
