"""Tencent Cloud image tags: Packer 1.6's built-in builder has no `image_tags`, and the plugin's (1.7+) can carry only
what is known before the build, not the driver, CUDA and kernel versions provisioning found.

So after the build gpunode tags the image itself with the Tag API's ModifyResourceTags on the image's six-segment name,
the way Tencent's own Terraform provider tags cvm images (facts and sources: gpunode/image/cloud_facts.TENCENTCLOUD).
The SDK is an extra (`pip install 'gpunode[tencent]'`); credentials come from TENCENTCLOUD_SECRET_ID/_SECRET_KEY.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any, Protocol

from gpunode.errors import GpunodeError, UsageError
from gpunode.image.cloud_facts import TENCENTCLOUD
from gpunode.vendor_facts import value

MAX_TAGS_PER_CALL = value(TENCENTCLOUD, "tags_per_call")  # also the SDK request model's ReplaceTags limit
EXTRA_FIX = "pip install 'gpunode[tencent]' (the Tencent Cloud Tag SDK)"


class TagClient(Protocol):
    def ModifyResourceTags(self, request: Any) -> Any: ...  # noqa: N802 (the SDK's method name)


def resource_name(region: str, image_id: str) -> str:
    """The image's six-segment resource name."""
    return value(TENCENTCLOUD, "image_resource").format(region=region, image_id=image_id)


def tag_text(text: str, limit: int) -> str:
    """A tag key or value Tencent accepts: other characters become `_`, no edge spaces, never empty."""
    allowed = set(value(TENCENTCLOUD, "tag_value_specials")) | {" "}
    cleaned = "".join(c if c.isalnum() or c in allowed else "_" for c in text).strip()[:limit].strip()
    return cleaned or "none"


def cloud_tags(tags: dict[str, str]) -> dict[str, str]:
    """The tags as Tencent will hold them (what image.json records too)."""
    return {tag_text(k, 127): tag_text(v, 255) for k, v in tags.items()}


def _chunks(tags: dict[str, str]) -> Iterator[list[tuple[str, str]]]:
    items = list(cloud_tags(tags).items())
    for start in range(0, len(items), MAX_TAGS_PER_CALL):
        yield items[start:start + MAX_TAGS_PER_CALL]


def requests(region: str, image_id: str, tags: dict[str, str]) -> list[Any]:
    """The SDK's ModifyResourceTags requests that put `tags` on the image (10 tags a request)."""
    try:
        from tencentcloud.tag.v20180813 import models
    except ImportError:
        raise UsageError("tagging Tencent images on Packer 1.6 needs the Tencent Cloud Tag SDK", fix=EXTRA_FIX) \
            from None
    made = []
    for chunk in _chunks(tags):
        request = models.ModifyResourceTagsRequest()
        request.from_json_string(json.dumps({
            "Resource": resource_name(region, image_id),
            "ReplaceTags": [{"TagKey": k, "TagValue": v} for k, v in chunk]}))
        made.append(request)
    return made


def require_sdk() -> None:
    """Refuse a build that could not tag its image, before anything is created."""
    try:
        import tencentcloud.tag.v20180813.tag_client  # noqa: F401
    except ImportError:
        raise UsageError("gpunode tags Tencent images after the build (Packer 1.6's builder cannot, 1.7+'s lacks the "
                         "versions) and needs the Tencent Cloud Tag SDK for it, which is not installed",
                         fix="pip install 'gpunode[tencent]'") from None


def client(region: str) -> TagClient:
    """A Tag API client with the credentials of the environment (the variables the Packer builder reads too)."""
    from tencentcloud.common import credential
    from tencentcloud.tag.v20180813 import tag_client

    secret_id, secret_key = os.environ.get("TENCENTCLOUD_SECRET_ID"), os.environ.get("TENCENTCLOUD_SECRET_KEY")
    if not secret_id or not secret_key:
        raise UsageError("TENCENTCLOUD_SECRET_ID and TENCENTCLOUD_SECRET_KEY are needed to tag the image",
                         fix="export both, as for the build itself")
    return tag_client.TagClient(credential.Credential(secret_id, secret_key), region)


def artifact_image(artifact: str, region: str) -> tuple[str, str]:
    """(region, image id) from the builder's artifact id, `region:img-...` (several regions: comma-separated)."""
    first = artifact.split(",")[0]
    where, _, image = first.rpartition(":")
    return (where or region), image


def tag_image(region: str, image_id: str, tags: dict[str, str], tag_client: TagClient | None = None) -> int:
    """Put `tags` on the image; the number of API calls made. A failure names the image and the fix."""
    calls = requests(region, image_id, tags)
    api = tag_client or client(region)
    for request in calls:
        try:
            api.ModifyResourceTags(request)
        except Exception as exc:  # the SDK raises TencentCloudSDKException (and network errors)
            raise GpunodeError(f"image {image_id} was made but could not be tagged: {exc}", step="tag image",
                               fix="allow tag:ModifyResourceTags for these credentials, then tag the image with the "
                               "values in image.json, or delete it") from None
    return len(calls)
