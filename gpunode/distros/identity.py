"""Which family and package manager an os-release ID (and ID_LIKE) belongs to.

Read by `gpunode.facts` when it parses /etc/os-release: this module imports nothing of gpunode, so the facts layer
can use it while the adapters (which take the parsed facts) stay above it.
"""

from __future__ import annotations

_DEBIAN_IDS = {"debian", "ubuntu"}
_REDHAT_IDS = {"rhel", "rocky", "almalinux", "centos", "fedora", "ol", "eurolinux", "cloudlinux", "circle",
               "alinux", "tencentos", "opencloudos", "anolis"}
_REDHAT_LIKE = {"rhel", "fedora", "centos"}
_SUSE_IDS = {"sles", "sled", "suse", "sle-micro", "opensuse", "opensuse-leap", "opensuse-tumbleweed"}
# EL-compatible distros with their own release numbering (3 = EL 8): yum up to 2, dnf from 3.
_OWN_NUMBERING = ("alinux", "tencentos", "opencloudos", "anolis")

FAMILIES = ("debian", "redhat", "amazon", "suse", "unknown")
APT_FAMILY = "debian"  # the family whose hosts use dpkg/apt


def distro_family(os_id: str, id_like: tuple[str, ...]) -> str:
    """debian | redhat | amazon | suse | unknown."""
    like = set(id_like)
    if os_id == "amzn":
        return "amazon"
    if os_id in _DEBIAN_IDS or like & _DEBIAN_IDS:
        return "debian"
    if os_id in _REDHAT_IDS or like & _REDHAT_LIKE:
        return "redhat"
    if os_id in _SUSE_IDS or os_id.startswith("opensuse") or "suse" in like:
        return "suse"
    return "unknown"


def default_package_manager(family: str, os_id: str, major: int | None) -> str | None:
    """The package manager a distro release ships, derived from os-release alone."""
    if family == "debian":
        return "apt"
    if family == "suse":
        return "zypper"
    if family == "amazon":  # AL1 (2018.03) and AL2 use yum, AL2023 dnf
        return "dnf" if major is not None and major >= 2022 else "yum"
    if family == "redhat":
        if os_id == "fedora":
            return "dnf" if major is None or major >= 22 else "yum"
        if os_id in _OWN_NUMBERING:
            return "yum" if major is not None and major <= 2 else "dnf"
        return "yum" if major is not None and major <= 7 else "dnf"
    return None
