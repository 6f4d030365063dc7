"""Base images per cloud: how to find them, who logs in, the root device."""

from __future__ import annotations

from dataclasses import dataclass

from gpunode.errors import UsageError

CANONICAL, DEBIAN, AMAZON = "099720109477", "136693071363", "amazon"


@dataclass(frozen=True)
class AwsBase:
    name_filter: str
    owners: tuple[str, ...]
    ssh_username: str
    root_device: str


AWS_BASES = {
    "ubuntu-22.04": AwsBase("ubuntu/images/hvm-ssd/ubuntu-jammy-22.04-amd64-server-*", (CANONICAL,), "ubuntu",
                            "/dev/sda1"),
    "ubuntu-24.04": AwsBase("ubuntu/images/hvm-ssd-gp3/ubuntu-noble-24.04-amd64-server-*", (CANONICAL,), "ubuntu",
                            "/dev/sda1"),
    "al2023": AwsBase("al2023-ami-2023.*-kernel-6.1-x86_64", (AMAZON,), "ec2-user", "/dev/xvda"),
    "debian-12": AwsBase("debian-12-amd64-*", (DEBIAN,), "admin", "/dev/xvda"),
}
# Alibaba Cloud and Tencent Cloud need the base image id (`--source-image`); the base picks the login user.
ALICLOUD_USERS = {"ubuntu-22.04": "root", "ubuntu-24.04": "root", "debian-12": "root"}
TENCENT_USERS = {"ubuntu-22.04": "ubuntu", "ubuntu-24.04": "ubuntu", "debian-12": "root"}
QEMU_USERS = {"ubuntu-22.04": "ubuntu", "ubuntu-24.04": "ubuntu", "debian-12": "debian"}


def aws_base(base: str) -> AwsBase:
    try:
        return AWS_BASES[base]
    except KeyError:
        raise UsageError(f"unknown base {base!r} for AWS", fix=f"use one of: {', '.join(AWS_BASES)}") from None


def other_base(builder: str, base: str) -> str:
    """The login user of a base on another builder."""
    table = {"alicloud": ALICLOUD_USERS, "tencent": TENCENT_USERS, "qemu": QEMU_USERS}[builder]
    if base not in table:
        raise UsageError(f"base {base!r} is not available for {builder}", fix=f"use one of: {', '.join(table)}")
    return table[base]
