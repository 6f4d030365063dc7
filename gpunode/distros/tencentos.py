"""TencentOS Server 3 (EL 8 compatible) and 4 (EL 9 compatible): the public image names on Tencent Cloud."""

from __future__ import annotations

from typing import ClassVar

from gpunode.distros.image_base import CloudBase, ImageBase
from gpunode.distros.rpm import RpmDistro

IMAGE_BASES = {"tencentos-3": ImageBase(clouds={"tencent": CloudBase("root", "tencentos_3")}),
               "tencentos-4": ImageBase(clouds={"tencent": CloudBase("root", "tencentos_4")})}


class TencentOS(RpmDistro):
    """TencentOS Server: its own numbering; EPEL's release RPM would read its $releasever (see extra_repos)."""

    ids = ("tencentos",)
    matrix_order = 7
    supported: ClassVar[dict[str, tuple[str, ...]]] = {"tencentos": ("3", "4")}
    el_compat: ClassVar[dict[int, int]] = {3: 8, 4: 9}

    def el_major(self) -> int | None:
        return self.el_compat.get(self.os.version_major or 0)
