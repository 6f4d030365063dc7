"""Image names a cloud accepts: the default made safe, a given one refused rather than changed."""

from __future__ import annotations

import re

from gpunode.errors import UsageError

# Alibaba Cloud and Tencent Cloud image names: letters, digits, `_` and `-` are safe on both (each cloud's module
# gives its length limit).
_SAFE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{1,127}\Z")
_UNSAFE = r"[^A-Za-z0-9_-]"
_FIX = "use at most {limit} letters, digits, _ and -, starting with a letter"


def cloud_image_name(builder: str, name: str, build_id: str, given: bool, limit: int, *,
                     accepted: re.Pattern[str] = _SAFE, unsafe: str = _UNSAFE, lower: bool = False,
                     fix: str = _FIX, by: str = "the cloud") -> str:
    """The default name made safe ("22.04" -> "22-04", lowercase where the cloud wants it) and short enough, the
    build id kept (names must be unique); a name the user gave is refused rather than changed. `accepted` is the
    cloud's rule for a whole name, `unsafe` the characters the default loses."""
    if given:
        if not accepted.match(name) or len(name) > limit:
            raise UsageError(f"{builder} image name {name!r} is not accepted by {by}",
                             fix=fix.format(limit=limit))
        return name
    fold = str.lower if lower else str
    safe = re.sub(unsafe, "-", fold(name))
    suffix = "-" + re.sub(unsafe, "-", fold(build_id))
    if len(safe) > limit:
        head = safe[:-len(suffix)] if safe.endswith(suffix) else safe
        safe = head[:limit - len(suffix)].rstrip("-_") + suffix
    return safe
