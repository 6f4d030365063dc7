"""Base images per cloud: how to find them, who logs in, the root device."""

from __future__ import annotations

import re

from gpunode.distros import (
    AL2_IMAGE_IDS,
    AWS_IMAGE_BASES,
    DEFAULT_BASE,
    IMAGE_BASES,
    QEMU_EXAMPLE_IMAGE,
    AwsBase,
    bases_help,
)
from gpunode.errors import UsageError
from gpunode.vendor_aws import fact

__all__ = ["ALICLOUD_USERS", "AWS_BASES", "DEFAULT_BASE", "QEMU_EXAMPLE_IMAGE", "QEMU_USERS", "TENCENT_USERS",
           "AwsBase", "alicloud_image_family", "alicloud_source_example", "aws_base", "bases_help", "batch_image_type",
           "other_base", "tencent_image_name", "tencent_os_name"]

# The bases and their facts are the distro adapters' (gpunode/distros/): AMI filters and owners, login users.
AWS_BASES: dict[str, AwsBase] = {name: base.aws for name, base in AWS_IMAGE_BASES.items() if base.aws}
# Alibaba Cloud and Tencent Cloud need the base image id (`--source-image`); the base picks the login user.
# Alibaba Cloud Linux 3 and TencentOS Server 3 are the clouds' own OS for ACK and TKE node pools (root logs in).
ALICLOUD_USERS = {name: base.alicloud_user for name, base in IMAGE_BASES.items() if base.alicloud_user}
TENCENT_USERS = {name: base.tencent_user for name, base in IMAGE_BASES.items() if base.tencent_user}
QEMU_USERS = {name: base.qemu_user for name, base in IMAGE_BASES.items() if base.qemu_user}


def tencent_image_name(base: str) -> str | None:
    """Without --source-image, the tencentcloud builder's source_image_name (a regular expression over image names)
    for TencentOS: the names Tencent gives its public images (gpunode/image/cloud_facts.py TENCENTCLOUD)."""
    from gpunode.image.cloud_facts import TENCENTCLOUD

    key = IMAGE_BASES[base].tencent_name_key if base in IMAGE_BASES else None
    if not key:
        return None
    return "^" + re.escape(TENCENTCLOUD[key].value).replace("\\ ", " ") + r"\b"  # RE2 (Go), like Python's here


def tencent_os_name(base: str) -> str:
    """The OS name of a TencentOS base as DescribeImages reports it in OsName (e.g. "TencentOS Server 3")."""
    from gpunode.image.cloud_facts import TENCENTCLOUD

    return str(TENCENTCLOUD[IMAGE_BASES[base].tencent_name_key].value)


def alicloud_image_family(base: str) -> str | None:
    """Without --source-image, the alicloud plugin's image_family (1.7+ only): Alibaba's public image families."""
    from gpunode.image.cloud_facts import ALICLOUD

    key = IMAGE_BASES[base].alicloud_family_key if base in IMAGE_BASES else None
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
    if os_id in AL2_IMAGE_IDS:
        return fact("image_type_al2_gpu")
    return fact("image_type_al2023_gpu")


def other_base(builder: str, base: str) -> str:
    """The login user of a base on another builder."""
    table = {"alicloud": ALICLOUD_USERS, "tencent": TENCENT_USERS, "qemu": QEMU_USERS}[builder]
    if base not in table:
        raise UsageError(f"base {base!r} is not available for {builder}", fix=f"use one of: {', '.join(table)}")
    return table[base]


def alicloud_source_example(base: str) -> str:
    """An Alibaba public image id of the base's kind, for a message asking for --source-image."""
    known = IMAGE_BASES.get(base)
    return (known and known.alicloud_example) or IMAGE_BASES[DEFAULT_BASE].alicloud_example or ""

