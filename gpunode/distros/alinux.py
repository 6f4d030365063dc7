"""Alibaba Cloud Linux 3 (EL 8 compatible, PLATFORM_ID platform:al8): Alibaba's releasever adapter before EPEL,
the image family on Alibaba Cloud."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from gpunode.distros.image_base import CloudBase, ImageBase
from gpunode.distros.rpm import RpmDistro
from gpunode.vendor_facts import Fact, Source, fact_table, value

if TYPE_CHECKING:
    from gpunode.distros.base import CrbAccess

ALINUX = fact_table("alinux", {
    "releasever_adapter": Fact("dnf-plugin-releasever-adapter", Source(
        url="https://help.aliyun.com/zh/ecs/use-cases/install-and-use-docker-on-a-linux-ecs-instance"),
        "Alibaba's dnf repository compatibility plugin for Alibaba Cloud Linux 3: repositories written for EL 8 "
        "($releasever) work there"),
    "adapter_repo": Fact("alinux3-plus", Source(
        url="https://help.aliyun.com/zh/ecs/use-cases/install-and-use-docker-on-a-linux-ecs-instance"),
        "dnf -y install dnf-plugin-releasever-adapter --repo alinux3-plus"),
})

IMAGE_BASES = {"alinux-3": ImageBase(clouds={
    "alicloud": CloudBase("root", "family_alinux_3", "aliyun_3_x64_20G_alibase_<date>.vhd")})}


class Alinux(RpmDistro):
    """Alibaba Cloud Linux: its own numbering (3 = EL 8)."""

    ids = ("alinux",)
    matrix_order = 6
    supported: ClassVar[dict[str, tuple[str, ...]]] = {"alinux": ("3",)}
    el_compat: ClassVar[dict[int, int]] = {3: 8}

    def el_major(self) -> int | None:
        return self.el_compat.get(self.os.version_major or 0)

    def extra_repos(self, pkg: CrbAccess | None = None) -> str:
        """Alibaba's releasever adapter first, so that EPEL 8's `$releasever` means 8 there (it is 3); an EPEL
        Alibaba already installed (epel-aliyuncs-release) is kept."""
        if self.el_major() is None:
            return ""
        adapter = value(ALINUX, "releasever_adapter")
        return (f"{{ rpm -q {adapter} >/dev/null || dnf -y install {adapter} --repo "
                f"{value(ALINUX, 'adapter_repo')}; }} && "
                f"{{ rpm -q epel-aliyuncs-release >/dev/null || {self.epel()}; }}")
