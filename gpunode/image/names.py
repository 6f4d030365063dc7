"""Image names a cloud accepts: the default made safe, a given one refused rather than changed."""

from __future__ import annotations

import re

from gpunode.errors import UsageError

# Alibaba Cloud and Tencent Cloud image names: letters, digits, `_` and `-` are safe on both (each cloud's module
# gives its length limit).
_SAFE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{1,127}\Z")


def cloud_image_name(builder: str, name: str, build_id: str, given: bool, limit: int) -> str:
    """The default name made safe ("22.04" -> "22-04") and short enough, the build id kept (names must be unique);
    a name the user gave is refused rather than changed."""
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
