"""Alibaba Cloud ECS images (alicloud-ecs): ACK node pools' Alibaba Cloud Linux 3, Ubuntu, Debian."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpunode.clouds.base import Cloud, Plugin
from gpunode.errors import UsageError

if TYPE_CHECKING:
    from gpunode.image.build import BuildRequest, _Build

MAX_NAME = 128  # image names: 2-128 characters


class Alicloud(Cloud):
    name = "alicloud"
    template = "alicloud.pkr.hcl"
    plugin = Plugin("alicloud", "github.com/hashicorp/alicloud", ">= 1.1.0, < 1.1.3")  # 1.1.3: RunInstances + EIP
    credentials = ("ALICLOUD_ACCESS_KEY", "ALICLOUD_SECRET_KEY")
    credentials_help = "ALICLOUD_ACCESS_KEY/ALICLOUD_SECRET_KEY (or ALICLOUD_PROFILE)"
    summary = "an Alibaba Cloud ECS image (ACK node pools)"

    def check_request(self, request: BuildRequest, variables: dict[str, Any]) -> None:
        self.base(request.base)
        check_network(variables)
        family = image_family(request.base)
        if not request.source_image and family:
            # Image families select custom images (the plugin's image_family, run_config.go 697283d:36-37): a public
            # base is given by its id, which DescribeImages finds by the public family (ImageOwnerAlias system)
            raise UsageError(f"alicloud builds need the id of the {request.base} base image: the plugin's "
                             "image_family picks the newest custom image of a family, not a public one",
                             fix=f"add --source-image (e.g. {self.base(request.base).example}); find it with `aliyun "
                             f"ecs DescribeImages --RegionId <region> --ImageOwnerAlias system --ImageFamily {family}`")
        super().check_request(request, variables)

    def image_name(self, name: str, build_id: str, given: bool) -> str:
        from gpunode.image.names import cloud_image_name

        return cloud_image_name(self.name, name, build_id, given, MAX_NAME)

    def template_vars(self, build: _Build) -> dict[str, Any]:
        from gpunode.image.keys import key_user_data

        user = self.base(build.request.base).user
        return {"image_name": build.name, "source_image": build.request.source_image or "",
                "tags": build.static_tags(), "ssh_username": user, "ssh_private_key_file": build.key_file,
                "user_data": key_user_data(user, build.public_key)}


def image_family(base: str) -> str | None:
    """Alibaba's public image family of a base (a key of gpunode/image/cloud_facts.py ALICLOUD on the adapter's
    image base), when it has one."""
    from gpunode.image.cloud_facts import ALICLOUD

    found = CLOUD.bases.get(base)
    key = found.lookup if found else ""
    return str(ALICLOUD[key].value) if key else None


def check_network(variables: dict[str, Any]) -> None:
    """VPC and vSwitch combinations the plugin accepts but then fails on, refused before anything is created."""
    if variables.get("vswitch_id") and not variables.get("vpc_id"):
        # packer-plugin-alicloud step_config_vpc.go creates a new VPC when vpc_id is empty; step_config_vswitch.go
        # then looks the vSwitch up in that new VPC and stops with "The specified vswitch ... doesn't exist".
        raise UsageError("vswitch_id without vpc_id: the alicloud plugin would create a new VPC and not find the "
                         "vSwitch there", fix="add --packer-var vpc_id=vpc-... (the VPC of that vSwitch)")
    if variables.get("vpc_id") and not variables.get("vswitch_id"):
        # step_config_vswitch.go creates a vSwitch when vswitch_id is empty, in vpc_id when given, at vpc_cidr_block or
        # 172.16.0.0/24 (cloud_facts.ALICLOUD): outside the VPC's CIDR, or where that range is taken, the build fails.
        raise UsageError("vpc_id without vswitch_id: the alicloud plugin would create a vSwitch at 172.16.0.0/24 in "
                         "your VPC, which fails unless that range is inside the VPC and free",
                         fix="add --packer-var vswitch_id=vsw-... (a vSwitch of that VPC in the build's zone), or "
                         "leave vpc_id out and Packer makes a VPC and vSwitch of its own")


CLOUD = Alicloud()
