"""Tencent Cloud CVM images (tencentcloud-cvm): TKE node pools' TencentOS Server, Ubuntu, Debian."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from gpunode.clouds.base import Cloud, Plugin
from gpunode.errors import UsageError

if TYPE_CHECKING:
    from gpunode.image.build import BuildRequest, BuildResult, _Build

DEFAULT_REGION, DEFAULT_ZONE = "ap-guangzhou", "ap-guangzhou-6"  # packer/tencent.pkr.hcl's defaults
MAX_NAME = 60  # packer-plugin-tencentcloud's image_config.go; unique per region


class Tencent(Cloud):
    name = "tencent"
    template = "tencent.pkr.hcl"
    plugin = Plugin("tencentcloud", "github.com/hashicorp/tencentcloud", ">= 1.2.0, < 1.3.0")
    credentials = ("TENCENTCLOUD_SECRET_ID", "TENCENTCLOUD_SECRET_KEY")
    credentials_help = "TENCENTCLOUD_SECRET_ID/TENCENTCLOUD_SECRET_KEY"
    summary = "a Tencent Cloud CVM image (TKE node pools)"
    image_id_example = "img-xxxxxxxx"

    def found_by(self, base: str) -> str:
        return f"its OS name {os_name(base)!r} (DescribeImages, every page)" if self.base(base).lookup else ""

    def check_request(self, request: BuildRequest, variables: dict[str, Any]) -> None:
        self.base(request.base)
        check_zone(variables)
        if request.source_image or not image_name_pattern(request.base):
            super().check_request(request, variables)  # found by name (source_image_name) otherwise
        if not request.validate_only:
            from gpunode.image import tencent

            tencent.require_sdk()  # gpunode tags the image after the build (Packer 1.6 cannot; 1.7+ lacks versions)

    def image_name(self, name: str, build_id: str, given: bool) -> str:
        from gpunode.image.names import cloud_image_name

        return cloud_image_name(self.name, name, build_id, given, MAX_NAME)

    def template_vars(self, build: _Build) -> dict[str, Any]:
        from gpunode.image.keys import key_user_data

        request, user = build.request, self.base(build.request.base).user
        variables: dict[str, Any] = {"image_name": build.name, "source_image": request.source_image or "",
                     "tags": build.static_tags(), "ssh_username": user, "ssh_private_key_file": build.key_file,
                     "user_data": key_user_data(user, build.public_key)}
        if not request.source_image:  # validated as a name; a build gets the id (resolve)
            variables["source_image_name"] = image_name_pattern(request.base)
        return variables

    def resolve(self, request: BuildRequest, variables: dict[str, Any]) -> dict[str, Any]:
        if request.source_image:
            return {}
        return public_base(request.base, str(variables.get("region") or DEFAULT_REGION))

    def cloud_tags(self, tags: dict[str, str]) -> dict[str, str]:
        from gpunode.image import tencent

        return tencent.cloud_tags(tags)

    def tag_image(self, build: _Build, result: BuildResult, tag_client: Any = None) -> str:
        """Every tag, on every Packer version: 1.6's builder tags nothing, and 1.7+'s image_tags are only the static
        ones (the versions are known after provisioning)."""
        from gpunode.image import tencent

        region, image_id = tencent.artifact_image(result.image_id, result.region)
        calls = tencent.tag_image(region, image_id, result.tags, tag_client)
        result.image_id, result.region = image_id, region
        return f"tagged by gpunode ({calls} ModifyResourceTags call{'s' if calls != 1 else ''})"


def image_name_pattern(base: str) -> str | None:
    """Without --source-image, the builder's source_image_name (a regular expression over image names) for
    TencentOS: the names Tencent gives its public images."""
    from gpunode.image.cloud_facts import TENCENTCLOUD

    found = CLOUD.bases.get(base)  # `lookup`: a key of TENCENTCLOUD, the OS name Tencent gives the public image
    key = found.lookup if found else ""
    if not key:
        return None
    return "^" + re.escape(TENCENTCLOUD[key].value).replace("\\ ", " ") + r"\b"  # RE2 (Go), like Python's here


def os_name(base: str) -> str:
    """The OS name of a TencentOS base as DescribeImages reports it in OsName (e.g. "TencentOS Server 3")."""
    from gpunode.image.cloud_facts import TENCENTCLOUD

    return str(TENCENTCLOUD[CLOUD.base(base).lookup].value)


def public_base(base: str, region: str, call: Any = None) -> dict[str, str]:
    """The TencentOS base's image id, found by gpunode (every DescribeImages page, matched on OsName) instead of the
    builder's one-page name lookup."""
    from gpunode.image import tencent_images

    image_id, _ = tencent_images.find_public_image(os_name(base), call or tencent_images.caller(region))
    return {"source_image": image_id, "source_image_name": ""}


def check_zone(variables: dict[str, Any]) -> None:
    """A zone outside the region: the plugin would fail only once it launches."""
    region = str(variables.get("region") or DEFAULT_REGION)
    zone = str(variables.get("zone") or (DEFAULT_ZONE if region == DEFAULT_REGION else ""))
    if not zone.startswith(region + "-"):
        raise UsageError(f"zone {zone or '(none)'} is not in region {region}",
                         fix=f"add --packer-var zone={region}-N (a zone of {region} that has the instance type)")


CLOUD = Tencent()
