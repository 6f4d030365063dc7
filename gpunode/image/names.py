"""Image names each cloud accepts, and the checks on template variables that a plugin would only fail at run time."""

from __future__ import annotations

import re
from typing import Any

from gpunode.errors import UsageError

# Alibaba Cloud and Tencent Cloud image names: letters, digits, `_` and `-` are safe on both (Alibaba: 2-128
# characters; Tencent: at most 60, checked by packer-plugin-tencentcloud's image_config.go, and unique per region).
MAX_LENGTH = {"alicloud": 128, "tencent": 60}
TENCENT_DEFAULT = ("ap-guangzhou", "ap-guangzhou-6")  # packer/tencent.pkr.hcl's region and zone defaults
_SAFE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{1,127}\Z")


def cloud_image_name(builder: str, name: str, build_id: str, given: bool) -> str:
    """The default name made safe ("22.04" -> "22-04") and short enough, the build id kept (names must be unique);
    a name the user gave is refused rather than changed."""
    limit = MAX_LENGTH[builder]
    if given:
        if not _SAFE.match(name) or len(name) > limit:
            raise UsageError(f"{builder} image name {name!r} is not accepted by the cloud",
                             fix=f"use at most {limit} letters, digits, _ and -, starting with a letter")
        return name
    safe = re.sub(r"[^A-Za-z0-9_-]", "-", name)
    suffix = "-" + re.sub(r"[^A-Za-z0-9_-]", "-", build_id)
    if len(safe) > limit:
        head = safe[:-len(suffix)] if safe.endswith(suffix) else safe
        safe = head[:limit - len(suffix)].rstrip("-_") + suffix
    return safe


def check_network_vars(builder: str, variables: dict[str, Any]) -> None:
    """Combinations the plugins accept but then fail on, refused before anything is created."""
    if builder == "alicloud" and variables.get("vswitch_id") and not variables.get("vpc_id"):
        # packer-plugin-alicloud step_config_vpc.go creates a new VPC when vpc_id is empty; step_config_vswitch.go
        # then looks the vSwitch up in that new VPC and stops with "The specified vswitch ... doesn't exist".
        raise UsageError("vswitch_id without vpc_id: the alicloud plugin would create a new VPC and not find the "
                         "vSwitch there", fix="add --packer-var vpc_id=vpc-... (the VPC of that vSwitch)")
    if builder == "alicloud" and variables.get("vpc_id") and not variables.get("vswitch_id"):
        # step_config_vswitch.go creates a vSwitch when vswitch_id is empty, in vpc_id when given, at vpc_cidr_block or
        # 172.16.0.0/24 (cloud_facts.ALICLOUD): outside the VPC's CIDR, or where that range is taken, the build fails.
        raise UsageError("vpc_id without vswitch_id: the alicloud plugin would create a vSwitch at 172.16.0.0/24 in "
                         "your VPC, which fails unless that range is inside the VPC and free",
                         fix="add --packer-var vswitch_id=vsw-... (a vSwitch of that VPC in the build's zone), or "
                         "leave vpc_id out and Packer makes a VPC and vSwitch of its own")
    if builder == "tencent":
        region = str(variables.get("region") or TENCENT_DEFAULT[0])
        zone = str(variables.get("zone") or (TENCENT_DEFAULT[1] if region == TENCENT_DEFAULT[0] else ""))
        if not zone.startswith(region + "-"):
            raise UsageError(f"zone {zone or '(none)'} is not in region {region}",
                             fix=f"add --packer-var zone={region}-N (a zone of {region} that has the instance type)")
