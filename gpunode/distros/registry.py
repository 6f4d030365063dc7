"""Picks a host's adapter from its os-release ID (then ID_LIKE), and gathers what the adapters publish: the
matrix, the image bases, the lab's distro."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpunode.distros import al2023, alinux, debian, el, tencentos, ubuntu
from gpunode.distros.base import Distro
from gpunode.distros.image_base import ImageBase
from gpunode.distros.rpm import RpmDistro

if TYPE_CHECKING:
    from gpunode.distros.base import OsRelease

# In the order of the supported matrix (error messages list it so).
ADAPTERS: tuple[type[Distro], ...] = (ubuntu.Ubuntu, debian.Debian, el.Rhel, el.El, al2023.Al2023, alinux.Alinux,
                                      tencentos.TencentOS)
_BY_ID = {os_id: cls for cls in ADAPTERS for os_id in cls.ids}


def for_os(os: OsRelease) -> Distro:
    """The adapter for a host: by ID, else by the first ID_LIKE an adapter serves, else the RPM family's base (a
    distro outside the matrix, which `check_supported` refuses)."""
    cls = _BY_ID.get(os.id) or next((_BY_ID[like] for like in os.id_like if like in _BY_ID), RpmDistro)
    return cls(os)


LAB = debian  # the lab's distro module: CLOUD_USER, ARCHIVE_URL_MARK, LAB_CLOUD_IMAGE
example_login_user = ubuntu.LOGIN_USER
test_container_image = ubuntu.TEST_CONTAINER_IMAGE
DEFAULT_BASE = ubuntu.DEFAULT_BASE
QEMU_EXAMPLE_IMAGE = debian.QEMU_EXAMPLE_IMAGE
AL2_IMAGE_IDS = al2023.AL2_IMAGE_IDS

# Every `--base` name, in the order the builders list them (AWS: Ubuntu, Amazon Linux, Debian; the others: Ubuntu,
# Debian, the clouds' own distros).
IMAGE_BASES: dict[str, ImageBase] = {**ubuntu.IMAGE_BASES, **debian.IMAGE_BASES, **alinux.IMAGE_BASES,
                                     **tencentos.IMAGE_BASES}
AWS_IMAGE_BASES: dict[str, ImageBase] = {**ubuntu.IMAGE_BASES, **al2023.IMAGE_BASES, **debian.IMAGE_BASES}
# The AMI facts of the plain distros' bases (the publishers' own names and accounts), one mapping for the tests.
AMI_FACTS = {**ubuntu.UBUNTU_AMIS, **debian.DEBIAN_AMIS}


# Each --base name and the adapter of the system an instance of it runs.
_BASE_ADAPTER: dict[str, type[Distro]] = {
    **dict.fromkeys(ubuntu.IMAGE_BASES, ubuntu.Ubuntu), **dict.fromkeys(debian.IMAGE_BASES, debian.Debian),
    **dict.fromkeys(al2023.IMAGE_BASES, al2023.Al2023), **dict.fromkeys(alinux.IMAGE_BASES, alinux.Alinux),
    **dict.fromkeys(tencentos.IMAGE_BASES, tencentos.TencentOS)}


def base_os_ids(base: str) -> tuple[str, ...]:
    """The os-release IDs an instance of a `--base` reports (its adapter's `ids`); () for a name that is no base."""
    adapter = _BASE_ADAPTER.get(base)
    return adapter.ids if adapter else ()
