"""The TencentOS base image of a Tencent build, found by gpunode itself before Packer starts.

The tencentcloud builder's own lookup (`source_image_name`) reads one DescribeImages page, filtered by instance type
only, and matches its regular expression against image names (TENCENTCLOUD source_image_name_lookup): a public image
beyond the first page is never seen, and TencentOS is named by its OS name. gpunode asks DescribeImages for public
images of the TencentOS platform, pages through every result (Offset/Limit, as the API documents), keeps the images
whose `OsName` starts with the base's OS name, and takes the newest (`CreatedTime`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from gpunode.errors import UsageError
from gpunode.image.cloud_facts import TENCENTCLOUD
from gpunode.vendor_facts import Fact, Source, fact_table, value

_DESCRIBE_IMAGES = "https://tencentcloud.com/document/api/213/33272"
_SDK_MODELS = "https://www.rubydoc.info/gems/tencentcloud-sdk-cvm/TencentCloud/Cvm/V20170312/DescribeImagesRequest"

TENCENT_IMAGES = fact_table("tencent_images", {
    "api": Fact(("cvm", "2017-03-12", "DescribeImages"), Source(url=_DESCRIBE_IMAGES),
                "service cvm, version 2017-03-12; Offset and Limit select a part of the results, by default the "
                "first 20"),
    "public_filter": Fact({"Name": "image-type", "Values": ["PUBLIC_IMAGE"]}, Source(url=_SDK_MODELS),
                          "image-type PUBLIC_IMAGE: Tencent Cloud's official images"),
    "platform_filter": Fact("platform", Source(url=_SDK_MODELS),
                            "filter by the image platform (e.g. CentOS), fuzzy match; the Platform of DescribeImages' "
                            "answer"),
    "page_size": Fact(20, Source(url=_DESCRIBE_IMAGES), "the API's default page (Limit not sent)"),
})

Caller = Callable[[str, dict[str, Any]], dict[str, Any]]  # (action, params) -> the answer's Response object


def caller(region: str) -> Caller:
    """DescribeImages through the common SDK's generic client (tencentcloud-sdk-python-common, which the Tag SDK of
    `gpunode[tencent]` brings), with the credentials the Packer builder reads too."""
    from tencentcloud.common import credential  # type: ignore[import-untyped]  # the SDK ships no type hints
    from tencentcloud.common.common_client import CommonClient  # type: ignore[import-untyped]

    secret_id, secret_key = os.environ.get("TENCENTCLOUD_SECRET_ID"), os.environ.get("TENCENTCLOUD_SECRET_KEY")
    if not secret_id or not secret_key:
        raise UsageError("TENCENTCLOUD_SECRET_ID and TENCENTCLOUD_SECRET_KEY are needed to find the TencentOS base "
                         "image", fix="export both, as for the build itself; or give --source-image img-...")
    service, version, _ = value(TENCENT_IMAGES, "api")
    client = CommonClient(service, version, credential.Credential(secret_id, secret_key), region)

    def call(action: str, params: dict[str, Any]) -> dict[str, Any]:
        answer = client.call_json(action, params)
        return answer.get("Response", answer)
    return call


def find_public_image(os_name: str, call: Caller) -> tuple[str, str]:
    """(image id, OS name) of the newest public image whose OsName starts with `os_name` (e.g. "TencentOS Server
    3"), every page read. None found: UsageError with the fix."""
    _, _, action = value(TENCENT_IMAGES, "api")
    platform = value(TENCENTCLOUD, "public_image_name_prefix")
    filters = [value(TENCENT_IMAGES, "public_filter"), {"Name": value(TENCENT_IMAGES, "platform_filter"),
                                                         "Values": [platform]}]
    found: list[dict[str, Any]] = []
    offset, total = 0, None
    while total is None or offset < total:
        answer = call(action, {"Filters": filters, "Offset": offset})
        page = answer.get("ImageSet") or []
        total = int(answer.get("TotalCount") or 0)
        found += [image for image in page if _is(image.get("OsName") or "", os_name)]
        if not page:
            break
        offset += len(page)
    if not found:
        raise UsageError(f"no public image of {os_name} among the {total or 0} {platform} public images of the region",
                         fix="give the base image with --source-image img-... (the console's public image list)")
    newest = max(found, key=lambda image: image.get("CreatedTime") or "")
    return newest["ImageId"], newest["OsName"]


def _is(found: str, wanted: str) -> bool:
    """"TencentOS Server 3.2 (Final)" is TencentOS Server 3; "TencentOS Server 31" would not be."""
    return found.startswith(wanted) and (len(found) == len(wanted) or not found[len(wanted)].isdigit())
