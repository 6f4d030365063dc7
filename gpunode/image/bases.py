"""AWS base images: how to find them, who logs in, the root device (the other clouds keep theirs in gpunode/clouds/)."""

from __future__ import annotations

from gpunode.distros import AL2_IMAGE_IDS, AWS_IMAGE_BASES, DEFAULT_BASE, AwsBase
from gpunode.errors import UsageError
from gpunode.vendor_aws import fact

__all__ = ["AWS_BASES", "DEFAULT_BASE", "AwsBase", "aws_base", "batch_image_type"]

# The bases and their facts are the distro adapters' (gpunode/distros/): AMI filters and owners, login users.
AWS_BASES: dict[str, AwsBase] = {name: base.aws for name, base in AWS_IMAGE_BASES.items() if base.aws}


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
    if os_id in AL2_IMAGE_IDS:
        return fact("image_type_al2_gpu")
    return fact("image_type_al2023_gpu")
