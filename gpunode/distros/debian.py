"""Debian: the driver of the release's non-free archive, the cloud kernels, the AMIs, and the lab's hosts.

Sources: Debian's non-free driver (https://wiki.debian.org/NvidiaGraphicsDrivers), Debian's cloud team image code.
"""

from __future__ import annotations

from typing import ClassVar

from gpunode.distros.apt import AptDistro
from gpunode.distros.base import DriverPackages, UnsupportedDistro, kernel_flavour
from gpunode.distros.image_base import AwsBase, CloudBase, ImageBase
from gpunode.vendor_facts import Fact, Source, fact_table, value

DEBIAN_IMAGES = "GoCarrot/debian-cloud-images"  # a GitHub copy of Debian's cloud team repository (salsa.debian.org)
DEBIAN_IMAGES_REF = "0bfa86237cd29276e1468454a696773136aaecef"

DEBIAN_AMIS = fact_table("debian-amis", {
    "debian_name": Fact("debian-{release}-amd64-20*", Source(
        DEBIAN_IMAGES, "src/debian_cloud_images/images/publicinfo.py", DEBIAN_IMAGES_REF, "22-28"),
        "release images: vendor_family debian-<release_id>-<arch>, the AMI name is it plus -<version> "
        "(upload_ec2.py:64; official version <date>-<n>, cli/build.py:202-206); daily and backports images are "
        "named debian-<id>-<arch>-daily-... and debian-<id>-backports-... (publicinfo.py:14-20, build.py:131-137): "
        "the date's first digits keep daily images out even where an account holds both"),
})
# The archive components besides main that the driver's packages come from: Debian's own install guide has the user
# add them to the apt sources (a cloud image lists only main). The lab's hosts list them too (LAB_COMPONENTS).
# Read in the archive's own indexes (dists/<suite>/<component>/binary-amd64/Packages.xz, each package's Section),
# 2026-11-25; Debian's install guide (https://wiki.debian.org/NvidiaGraphicsDrivers) says to add the same components.
_ARCHIVE = "https://deb.debian.org/debian/dists/{suite}/{component}/binary-amd64/Packages.xz"
DEBIAN_DRIVER_SOURCES = fact_table("debian-driver-sources", {
    "components": Fact(("contrib", "non-free", "non-free-firmware"),
        Source(url=_ARCHIVE.format(suite="bookworm", component="non-free")),
        "Debian 12 and 13: nvidia-kernel-dkms, nvidia-smi, libcuda1, libnvidia-ml1 are Section non-free/*, "
        "firmware-nvidia-gsp non-free-firmware/kernel, nvidia-persistenced and nvidia-open-kernel-dkms contrib/* "
        "(the same in trixie's indexes)"),
    "components_11": Fact(("contrib", "non-free"), Source(url=_ARCHIVE.format(suite="bullseye", component="non-free")),
        "Debian 11: the driver packages non-free/*, nvidia-persistenced contrib/utils; non-free-firmware begins "
        "with Debian 12"),
})
# Debian 13's two module flavours are separate source packages (nvidia-graphics-drivers, nvidia-open-gpu-kernel-modules)
# whose packages declare no Conflicts, Breaks or Replaces with each other: apt installs one beside the other. Each
# -kernel-dkms depends on its own -kernel-support (the modprobe configuration under /etc/nvidia/current[-open]).
# Read in trixie's indexes 2026-11-28 (contrib: nvidia-open-kernel-dkms 550.163.01-2; non-free: nvidia-kernel-dkms).
DEBIAN_MODULE_FLAVOURS = fact_table("debian-module-flavours", {
    "proprietary": Fact(("nvidia-kernel-dkms", "nvidia-kernel-support"),
                        Source(url=_ARCHIVE.format(suite="trixie", component="non-free")),
                        "Package nvidia-kernel-dkms: Depends nvidia-kernel-support--v1 (provided by "
                        "nvidia-kernel-support); no Conflicts with the open packages"),
    "open": Fact(("nvidia-open-kernel-dkms", "nvidia-open-kernel-support"),
                 Source(url=_ARCHIVE.format(suite="trixie", component="contrib")),
                 "Package nvidia-open-kernel-dkms: Depends nvidia-open-kernel-support--v1 (provided by "
                 "nvidia-open-kernel-support); Conflicts only nvidia-open-kernel-support-<version>"),
})
# The suites of a release's own archive: <codename>, <codename>-updates, -security, -backports, -proposed-updates.
ARCHIVE_SUITE_SEPARATOR = "-"
# Debian's AWS account for release AMIs: widely used, but no Debian-authored page or file stating it was reachable
# with the search tools (the cloud team's code names no account); re-check it against wiki.debian.org/Cloud.
AWS_OWNER = "136693071363"
# Debian ships one driver version per release; other branches come from NVIDIA's repository.
SHIPPED_BRANCH = {"11": 470, "12": 535, "13": 550}
# The user cloud-init makes on Debian's genericcloud images (the lab's VMs and the qemu builder log in as it).
CLOUD_USER = "debian"
# Where the lab finds a Debian archive among the machine's apt sources, and the lab's stand-in cloud image.
ARCHIVE_URL_MARK = "debian"
LAB_CLOUD_IMAGE = "debian-12-gpunode-cloud-amd64.qcow2"
QEMU_EXAMPLE_IMAGE = "debian-12-genericcloud-amd64.qcow2"
# The lab's hosts: the default suite (Debian 12), the suites a host can boot by the names users give them
# (codename, version or alias), the archive components the driver needs (non-free) and the suites without
# -updates and -security.
LAB_SUITE = "bookworm"
LAB_SUITES = {"bookworm": "bookworm", "12": "bookworm", "trixie": "trixie", "13": "trixie",
              "sid": "sid", "unstable": "sid",
              "bullseye": "bullseye", "11": "bullseye"}  # Debian 11: python3 is 3.9, older than gpunode's minimum
LAB_COMPONENTS = ("main", *value(DEBIAN_DRIVER_SOURCES, "components"))  # what the driver step wants: converged
ROLLING_SUITES = ("sid", "unstable")


def ami_filter(release: int) -> str:
    """Debian's release AMIs of one release (not its daily or backports images), from Debian's cloud image code."""
    return value(DEBIAN_AMIS, "debian_name").format(release=release)


_GCE_IMAGES = ("GoogleCloudPlatform/guest-test-infra", "concourse/pipelines/guest-package-build.jsonnet",
               "562e5d631e95ce9af31d71cc2f176f05d92c04f3")  # Google's own builds on the public image families
# Google Cloud's public Debian images: project/family (the gcp builder takes the newest of the family)
DEBIAN_GCE_IMAGES = fact_table("debian-gce-images", {
    "bookworm": Fact("debian-cloud/debian-12", Source(*_GCE_IMAGES, "999"),
                     "projects/debian-cloud/global/images/family/debian-12"),
    "trixie": Fact("debian-cloud/debian-13", Source(*_GCE_IMAGES, "1015"),
                   "projects/debian-cloud/global/images/family/debian-13"),
})
IMAGE_BASES = {
    "debian-12": ImageBase(AwsBase(ami_filter(12), (AWS_OWNER,), "admin", "/dev/xvda"), clouds={
        "alicloud": CloudBase("root"), "tencent": CloudBase("root"), "qemu": CloudBase(CLOUD_USER),
        "gcp": CloudBase(lookup=value(DEBIAN_GCE_IMAGES, "bookworm"))}),
    "debian-13": ImageBase(AwsBase(ami_filter(13), (AWS_OWNER,), "admin", "/dev/xvda"), clouds={
        "gcp": CloudBase(lookup=value(DEBIAN_GCE_IMAGES, "trixie"))}),
}


class Debian(AptDistro):
    """Debian: one driver version per release from non-free, or NVIDIA's repository (cuda-repo)."""

    ids = ("debian",)
    matrix_order = 2
    supported: ClassVar[dict[str, tuple[str, ...]]] = {"debian": ("11", "12", "13")}

    def newest_kernel_packages(self, running: str, kernel_package: str = "") -> list[str]:
        flavour = kernel_flavour(running)
        flavour = flavour if flavour in ("amd64", "cloud-amd64", "arm64", "cloud-arm64") else \
            ("cloud-arm64" if self.os.arch == "aarch64" else "cloud-amd64")
        return [f"linux-image-{flavour}", f"linux-headers-{flavour}"]

    driver_components_reason = "the NVIDIA driver is in Debian's non-free component"

    def driver_components(self, method: str) -> tuple[str, ...]:
        if method != "distro":
            return ()
        key = "components_11" if (self.os.version_major or 0) == 11 else "components"
        return value(DEBIAN_DRIVER_SOURCES, key)

    def is_archive_entry(self, uri: str, suite: str) -> bool:
        """Debian's archive for this release: a Debian mirror (the lab's mark: deb.debian.org, a cloud image's
        mirror+file:///etc/apt/mirrors/debian.list) and one of the release's suites."""
        codename = self.os.codename or ""
        return bool(codename) and ARCHIVE_URL_MARK in uri and \
            suite.split(ARCHIVE_SUITE_SEPARATOR, 1)[0] == codename

    def check_driver_choice(self, method: str, branch: int) -> None:
        if method != "distro":
            return
        shipped = SHIPPED_BRANCH.get(self.os.version_id)
        if shipped != branch:
            raise UnsupportedDistro(f"Debian {self.os.version_id} ships driver branch {shipped}, not {branch}",
                                    fix=f"set driver_branch: {shipped}, or method: cuda-repo for other branches")

    def distro_driver_packages(self, branch: int, flavor: str) -> DriverPackages:
        if flavor == "open" and (self.os.version_major or 0) < 13:
            raise UnsupportedDistro(f"Debian {self.os.version_id}'s open module package lags its driver version "
                                    "(Debian 13 has nvidia-open-kernel-dkms in contrib); use kernel_modules: "
                                    "proprietary or method: cuda-repo")
        kernel_pkg = "nvidia-open-kernel-dkms" if flavor == "open" else "nvidia-kernel-dkms"
        pkgs = (kernel_pkg, "nvidia-smi", "libcuda1", "libnvidia-ml1", "nvidia-persistenced", "firmware-nvidia-gsp")
        return DriverPackages(pkgs, pkgs[:4] + pkgs[5:], self.dkms_module_name("distro", flavor, None), (),
                              version_from=kernel_pkg)

    def coexisting_flavour_packages(self, method: str, branch: int, flavor: str) -> tuple[str, ...]:
        if method != "distro" or (self.os.version_major or 0) < 13:
            return ()
        return value(DEBIAN_MODULE_FLAVOURS, "proprietary" if flavor == "open" else "open")

    def dkms_module_name(self, method: str, flavor: str, driver_version: str | None) -> str:
        if method == "distro":
            return "nvidia-current-open" if flavor == "open" else "nvidia-current"
        return super().dkms_module_name(method, flavor, driver_version)

    def fabricmanager_packages(self, method: str, branch: int) -> tuple[str, ...]:
        """Debian's own archive has no fabric manager."""
        return () if method == "distro" else super().fabricmanager_packages(method, branch)

    def other_driver_packages(self, method: str, branch: int, flavor: str, names: set[str]) -> list[str]:
        return [] if method == "distro" else super().other_driver_packages(method, branch, flavor, names)

    def driver_pin(self, method: str, branch: int) -> str | None:
        return f"{branch}.*" if method == "distro" else None

    def docker_packages(self) -> tuple[str, ...]:
        """From Debian 13 the client is its own package (docker-cli), only recommended by docker.io."""
        if (self.os.version_major or 0) >= 13 or not self.os.version_id:
            return ("docker.io", "docker-cli")
        return ("docker.io",)

    def cuda_repo_name(self) -> str:
        return f"debian{self.os.version_major}"
