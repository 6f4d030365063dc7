"""RHEL and its rebuilds (Rocky, AlmaLinux, CentOS): EPEL and CodeReady Builder for DKMS.

Sources: NVIDIA/deepops (CRB through subscription-manager), AWS ParallelCluster's cookbook (CRB on RHUI); the `el`
table in rpm.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from gpunode.distros.base import UnsupportedDistro
from gpunode.distros.rpm import EL, RpmDistro
from gpunode.vendor_facts import value

if TYPE_CHECKING:
    from gpunode.distros.base import CrbAccess


class Rhel(RpmDistro):
    """Red Hat Enterprise Linux: CRB through subscription-manager or the cloud's RHUI."""

    ids = ("rhel",)
    matrix_order = 3
    supported: ClassVar[dict[str, tuple[str, ...]]] = {"rhel": ("8", "9")}

    def el_major(self) -> int | None:
        return self.os.version_major

    def extra_repos(self, pkg: CrbAccess | None = None) -> str:
        """EPEL's release RPM and codeready-builder, through subscription-manager when the host is registered
        (deepops), through the repo manager when a cloud's RHUI serves it (AWS ParallelCluster's cookbook)."""
        el = self.el_major() or 0
        return f"{crb_command(el, pkg)} && {self.epel()}"


class El(RpmDistro):
    """The RHEL rebuilds: `epel-release` from their extras repository, CRB named `crb` (9) or `powertools` (8)."""

    ids = ("rocky", "almalinux", "centos")
    matrix_order = 4
    supported: ClassVar[dict[str, tuple[str, ...]]] = {"rocky": ("8", "9"), "almalinux": ("8", "9")}

    def el_major(self) -> int | None:
        return self.os.version_major

    def extra_repos(self, pkg: CrbAccess | None = None) -> str:
        el = self.el_major()
        if el is None:
            return ""
        crb = "crb" if el >= 9 else "powertools"
        return (f"{{ rpm -q epel-release >/dev/null || dnf -y install epel-release; }} && "
                f"dnf config-manager --set-enabled {crb}")


def crb_command(el: int, pkg: CrbAccess | None) -> str:
    """Shell enabling CodeReady Builder on RHEL: subscription-manager on a registered host, the repo manager on a
    cloud's RHUI (pay-as-you-go images are not registered: subscription-manager would fail the whole chain)."""
    if pkg is not None and pkg.rhsm_registered:
        repo = value(EL, "crb_subscription").format(el=el, arch="$(arch)")
        return f"subscription-manager repos --enable {repo}"
    if pkg is not None and pkg.rhui_repo_files:
        repo = value(EL, "crb_rhui").format(el=el)
        return (f"{{ command -v yum-config-manager >/dev/null || dnf -y install yum-utils; }} && "
                f"yum-config-manager --enable {repo}")
    raise UnsupportedDistro(
        "RHEL is neither registered with subscription-manager (no /etc/pki/consumer/cert.pem) nor served by a "
        "cloud's RHUI (no /etc/yum.repos.d/*rhui*.repo): CodeReady Builder, which EPEL's dkms needs, cannot be enabled",
        fix="register the host (subscription-manager register), or install dkms from your own mirror first "
        "(then no repository is enabled)")
