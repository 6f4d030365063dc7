"""Ubuntu: Canonical's -server driver packages and precompiled signed modules, the kernel flavours, the AMIs.

Sources: Ubuntu's server driver packages (https://ubuntu.com/server/docs/nvidia-drivers-installation), NVIDIA's
gpu-driver-container (precompiled), canonical/nvidia-graphics-drivers; each fact below names its file and line.
"""

from __future__ import annotations

import re
from typing import ClassVar

from gpunode.distros.apt import AptDistro
from gpunode.distros.base import DriverPackages, UnsupportedDistro, kernel_flavour
from gpunode.distros.image_base import AwsBase, CloudBase, ImageBase
from gpunode.vendor_facts import GPU_DRIVER_CONTAINER, NVIDIA_DRIVER_ROLE, Fact, Source, fact_table, value

_UBUNTU_PKG = "canonical/nvidia-graphics-drivers"
_UBUNTU_570 = "85e3f828ccae56e6b09e5f37a3758d1b5597393b"  # branch 570-server
_UBUNTU_580 = "a65eb85c09dca2638ea471320345b201c5a7032c"  # branch 580-server
_UBUNTU_570_JAMMY = "f57ac99f954ec75060c041ccf50e2999081af4c4"  # branch 570-server-jammy
_UBUNTU_580_JAMMY = "fa6a075f873691b0f055ee43e5501aa826b512a8"  # branch 580-server-jammy
_UBUNTU_DRIVERS = ("canonical/ubuntu-drivers-common", "d3d785609b864f39ddce16098c9a64f3ff79057e")
UBUNTU_DOCS = "canonical/ubuntu-cloud-docs"
UBUNTU_DOCS_REF = "9a500e640037b2a6c607f25f3fdf27f137951610"
UBUNTU_FIND = "docs/aws/aws-how-to/instances/find-ubuntu-images.rst"

# Base AMIs (gpunode/image/bases.py): Canonical's own names and account.
UBUNTU_AMIS = fact_table("ubuntu-amis", {
    "ubuntu_jammy_name": Fact("ubuntu/images/hvm-ssd/ubuntu-jammy-22.04-amd64-server-*",
                              Source(UBUNTU_DOCS, UBUNTU_FIND, UBUNTU_DOCS_REF, "89-96"),
                              "ubuntu{prefix}/images/hvm-{vol}/ubuntu-{release}-{suite}-{arch}-{product}-{serial}; "
                              "vol is ssd for jammy and focal"),
    "ubuntu_noble_name": Fact("ubuntu/images/hvm-ssd-gp3/ubuntu-noble-24.04-amd64-server-*",
                              Source(UBUNTU_DOCS, UBUNTU_FIND, UBUNTU_DOCS_REF, "89-96"),
                              "the same pattern; vol is ssd-gp3 for noble and resolute"),
    "canonical_owner": Fact("099720109477", Source(UBUNTU_DOCS, UBUNTU_FIND, UBUNTU_DOCS_REF, "270-272"),
                            "OwnerId of Canonical's AMIs in the default partition (GovCloud and China differ)"),
})

UBUNTU = fact_table("ubuntu", {
    "headless_package": Fact("nvidia-headless-{branch}-server{open}",
        NVIDIA_DRIVER_ROLE.at("defaults/main.yml", "32-37"),
        "the role installs nvidia-headless-<branch> and nvidia-utils-<branch> with the suffix -server"),
    "utils_package": Fact("nvidia-utils-{branch}-server", NVIDIA_DRIVER_ROLE.at("defaults/main.yml", "37")),
    "dkms_module": Fact("nvidia-srv", Source(_UBUNTU_PKG, "debian/templates/dkms_nvidia.conf.in", _UBUNTU_570, "1"),
                        "PACKAGE_NAME of the -server proprietary DKMS package: `dkms status` lists nvidia-srv/<ver> "
                        "(same in the 535-, 550- and 580-server branches)"),
    "dkms_module_open": Fact("nvidia", Source(_UBUNTU_PKG, "debian/templates/dkms_nvidia_open.conf.in", _UBUNTU_570,
                                              "1"), "the -server-open DKMS package registers as plain nvidia"),
    "headless_provides": Fact("nvidia-headless", Source(_UBUNTU_PKG, "debian/control", _UBUNTU_580, "205-213"),
                              "every nvidia-headless-<branch>-server Conflicts/Provides/Replaces nvidia-headless: "
                              "one branch at a time, so a held old branch blocks the new one"),
    # Precompiled first (issue 30): Canonical's signed modules for the running kernel, DKMS only where there are none.
    "precompiled_first": Fact(True, Source(*_UBUNTU_DRIVERS[:1], "UbuntuDrivers/detect.py", _UBUNTU_DRIVERS[1],
                                           "2085-2158"),
                              "get_linux_modules_metapackage takes linux-modules-nvidia-<flavour>-<kernel ABI> when "
                              "the archive has it for the running kernel, and falls back to nvidia-dkms-<flavour> "
                              "only when it does not"),
    "headless_no_dkms_package": Fact("nvidia-headless-no-dkms-{branch}-server{open}", Source(
        _UBUNTU_PKG, "debian/control", _UBUNTU_580, "186-196"),
        "the driver without nvidia-dkms (-open variant: lines 476-485); gpu-driver-container's precompiled "
        "ubuntu22.04/nvidia-driver:413 installs it"),
    "precompiled_modules": Fact("linux-modules-nvidia-{branch}-server{open}-{kernel}",
        GPU_DRIVER_CONTAINER.at("ubuntu22.04/precompiled/nvidia-driver", "421-431"),
        "the precompiled modules for exactly the running kernel (open: ...-server-open-<kver>)"),
    "precompiled_objects": Fact("linux-objects-nvidia-{branch}-server-{kernel}",
        GPU_DRIVER_CONTAINER.at("ubuntu22.04/precompiled/nvidia-driver", "428-431"),
        "installed with the proprietary modules only"),
    "precompiled_signatures": Fact("linux-signatures-nvidia-{kernel}",
        GPU_DRIVER_CONTAINER.at("ubuntu24.04/precompiled/nvidia-driver", "435-439"),
        "Canonical's Secure Boot signatures for the modules; not published for arm64 (amd64 only there)"),
    "dkms_make_jobs": Fact("-j$PROCS_NUM (nproc, at most 16)", Source(
        _UBUNTU_PKG, "debian/templates/dkms_nvidia.conf.in", "008d68f19ea64bf0a2bea0505be88a2adcdcc5bd", "6-9"),
        "Canonical's template sets PROCS_NUM=`nproc`, caps it at 16 (line 7) and builds with make -j$PROCS_NUM: not "
        "all processors on a host with more than 16. gpunode leaves Canonical's file as it is (its own choice: the "
        "cap is the vendor's, and a second dkms.conf for a packaged module would be overwritten by the package)"),
    # Server branches Canonical ended: every package of the branch is a transitional (oldlibs) package that depends
    # on the next branch's, so installing `nvidia-headless-<old>-server` installs the next branch. Same on focal and
    # noble (550-server-focal@99cce95, 550-server-noble@4738992, 570-server-focal@3ce9590, 570-server-noble@d27e751).
    "server_transitional": Fact({550: 570, 570: 580}, Source(_UBUNTU_PKG, "debian/control", _UBUNTU_570_JAMMY, "84-89"),
                                "nvidia-headless-570-server: Section non-free/oldlibs, Depends nvidia-headless-580-"
                                "server, 'Transitional package for upgrades' (changelog 570.211.01-0ubuntu1.22.04.1: "
                                "Transition EOL 570 drivers to 580, LP: #2147038); 550-server-jammy@8390362 "
                                "debian/control:84-89 makes nvidia-headless-550-server depend on the 570 one "
                                "(LP: #2114726)"),
    "server_live": Fact((535, 580), Source(_UBUNTU_PKG, "debian/control", _UBUNTU_580_JAMMY, "204-214"),
                        "nvidia-headless-580-server is a real metapackage (Depends no-dkms + dkms of 580); so is "
                        "nvidia-headless-535-server (535-server-jammy@f9c1433 debian/control:200-209); Canonical's own "
                        "AWS guide installs nvidia-headless-580-server nvidia-utils-580-server "
                        "(canonical/ubuntu-cloud-docs "
                        "docs/aws/aws-how-to/instances/install-nvidia-drivers.rst@9a500e6:85)"),
})

# The default base of the image builders.
DEFAULT_BASE = "ubuntu-22.04"
_CANONICAL = value(UBUNTU_AMIS, "canonical_owner")
_GCE_IMAGES = ("GoogleCloudPlatform/guest-test-infra", "concourse/pipelines/guest-package-build.jsonnet",
               "562e5d631e95ce9af31d71cc2f176f05d92c04f3")  # Google's own builds on the public image families
# Google Cloud's public Ubuntu images: project/family (the gcp builder takes the newest of the family)
UBUNTU_GCE_IMAGES = fact_table("ubuntu-gce-images", {
    "jammy": Fact("ubuntu-os-cloud/ubuntu-2204-lts", Source(*_GCE_IMAGES, "1065"),
                  "projects/ubuntu-os-cloud/global/images/family/ubuntu-2204-lts"),
    "noble": Fact("ubuntu-os-cloud/ubuntu-2404-lts-amd64", Source(*_GCE_IMAGES, "1081"),
                  "projects/ubuntu-os-cloud/global/images/family/ubuntu-2404-lts-amd64"),
})
_ALI_EXAMPLE = "ubuntu_22_04_x64_20G_alibase_<date>.vhd"  # Alibaba's public image ids (root logs in there)
IMAGE_BASES = {
    "ubuntu-22.04": ImageBase(AwsBase(value(UBUNTU_AMIS, "ubuntu_jammy_name"), (_CANONICAL,), "ubuntu", "/dev/sda1"),
                              clouds={"alicloud": CloudBase("root", "family_ubuntu_22_04", _ALI_EXAMPLE),
                                      "tencent": CloudBase("ubuntu"), "qemu": CloudBase("ubuntu"),
                                      "gcp": CloudBase(lookup=value(UBUNTU_GCE_IMAGES, "jammy"))}),
    "ubuntu-24.04": ImageBase(AwsBase(value(UBUNTU_AMIS, "ubuntu_noble_name"), (_CANONICAL,), "ubuntu", "/dev/sda1"),
                              clouds={"alicloud": CloudBase("root", "family_ubuntu_24_04", _ALI_EXAMPLE),
                                      "tencent": CloudBase("ubuntu"), "qemu": CloudBase("ubuntu"),
                                      "gcp": CloudBase(lookup=value(UBUNTU_GCE_IMAGES, "noble"))}),
}
# The login user of Ubuntu's cloud images (cloud-init's default_user on Canonical's images), the example user of
# gpunode's sample inventories.
LOGIN_USER = "ubuntu"
# The container image NVIDIA's toolkit guide runs nvidia-smi in (any glibc image gets nvidia-smi from the toolkit).
TEST_CONTAINER_IMAGE = "ubuntu"


def _template_pattern(template: str) -> str:
    """A regular expression for the names a template of the table makes, whatever the branch, flavour and kernel."""
    pattern = re.escape(template)
    for field, part in (("branch", r"\d+"), ("open", "(?:-open)?"), ("kernel", ".+")):
        pattern = pattern.replace(re.escape(f"{{{field}}}"), part)
    return pattern


# Canonical's precompiled packages of any branch or flavour (those of another branch block an install when held).
_PRECOMPILED = re.compile("|".join(
    f"(?:{_template_pattern(value(UBUNTU, key))})$"
    for key in ("headless_no_dkms_package", "precompiled_modules", "precompiled_objects")))


def live_server_branch(branch: int) -> int | None:
    """The branch Canonical's packages of an ended server branch install instead (550 -> 580: 550's transitional
    packages depend on 570's, which depend on 580's); None for a branch that is itself live or unknown."""
    moved = value(UBUNTU, "server_transitional")
    if branch not in moved:
        return None
    while branch in moved:
        branch = moved[branch]
    return branch


class Ubuntu(AptDistro):
    """Ubuntu LTS: Canonical's -server driver branches, precompiled modules first."""

    ids = ("ubuntu",)
    matrix_order = 1
    supported: ClassVar[dict[str, tuple[str, ...]]] = {"ubuntu": ("20.04", "22.04", "24.04")}

    def newest_kernel_packages(self, running: str, kernel_package: str = "") -> list[str]:
        flavour = kernel_flavour(running) or "generic"
        return [f"linux-image-{flavour}", f"linux-headers-{flavour}"]

    def check_driver_choice(self, method: str, branch: int) -> None:
        """Canonical ended some server branches: their packages only pull in a later branch (and, on NVSwitch hosts,
        a fabric manager of the asked branch that no longer matches the driver). Refuse before anything installs."""
        live = live_server_branch(branch) if method == "distro" else None
        if live is None:
            return
        raise UnsupportedDistro(
            f"Ubuntu's nvidia-headless-{branch}-server is a transitional package: Canonical ended the "
            f"{branch}-server branch and its packages install the {live}-server driver instead",
            fix=f"set driver_branch: {live} (Canonical's live server branch), or method: cuda-repo or runfile to stay "
            f"on {branch}")

    def distro_driver_packages(self, branch: int, flavor: str) -> DriverPackages:
        open_suffix = "-open" if flavor == "open" else ""
        pkgs = (value(UBUNTU, "headless_package").format(branch=branch, open=open_suffix),
                value(UBUNTU, "utils_package").format(branch=branch))
        return DriverPackages(pkgs, pkgs, self.dkms_module_name("distro", flavor, None),
                              self.fabricmanager_packages("distro", branch), version_from=pkgs[1])

    def dkms_module_name(self, method: str, flavor: str, driver_version: str | None) -> str:
        if method == "distro":  # Canonical's -server DKMS packages
            return value(UBUNTU, "dkms_module_open" if flavor == "open" else "dkms_module")
        return super().dkms_module_name(method, flavor, driver_version)

    def archive_precompiled(self, method: str) -> bool:
        return method == "distro"

    def dkms_headless_package(self, branch: int, flavor: str) -> str:
        """The DKMS build's headless metapackage of the branch."""
        return value(UBUNTU, "headless_package").format(branch=branch, open="-open" if flavor == "open" else "")

    def archive_precompiled_packages(self, branch: int, flavor: str, kernel: str) -> DriverPackages:
        """Canonical's precompiled, signed modules for exactly `kernel`, with the driver without DKMS (what NVIDIA's
        precompiled Ubuntu driver container installs); no DKMS module to check."""
        open_suffix = "-open" if flavor == "open" else ""
        names = dict(branch=branch, open=open_suffix, kernel=kernel)
        pkgs = [value(UBUNTU, "headless_no_dkms_package").format(**names),
                value(UBUNTU, "utils_package").format(**names)]
        if flavor != "open":
            pkgs.append(value(UBUNTU, "precompiled_objects").format(**names))
        pkgs.append(value(UBUNTU, "precompiled_modules").format(**names))
        if self.os.arch != "aarch64":
            pkgs.append(value(UBUNTU, "precompiled_signatures").format(**names))
        fm = self.fabricmanager_packages("distro", branch)
        return DriverPackages(tuple(pkgs), tuple(pkgs), "", fm, version_from=pkgs[1])

    def precompiled_prefix(self, branch: int, flavor: str) -> str:
        """The start of the names of the branch's precompiled modules packages, one per kernel."""
        return value(UBUNTU, "precompiled_modules").format(branch=branch, open="-open" if flavor == "open" else "",
                                                          kernel="")

    @staticmethod
    def modules_package(pkgs: DriverPackages) -> str:
        """The precompiled modules package among `pkgs` ("" for a DKMS install)."""
        return next((p for p in pkgs.packages if p.startswith("linux-modules-nvidia-")), "")

    @staticmethod
    def is_precompiled_package(name: str) -> bool:
        """A package of Canonical's precompiled driver, of any branch or flavour."""
        return bool(_PRECOMPILED.match(name))

    def cuda_repo_name(self) -> str:
        return "ubuntu" + self.os.version_id.replace(".", "")
