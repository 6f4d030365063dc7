"""The RPM family's shared facts: NVIDIA's dnf module streams and precompiled kmods, kernel-devel, Docker CE, the
toolkit's .repo file. The `el` table holds NVIDIA's RPM packaging facts (EL 8/9 and Amazon Linux 2023 alike)."""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from gpunode.distros.base import Distro, DriverPackages, UnsupportedDistro, el_kernel_stem
from gpunode.distros.repos import CUDA_REPO, DOCKER, DOCKER_CE_PACKAGES, TOOLKIT
from gpunode.distros.versions import version_key
from gpunode.vendor_facts import DEEPOPS, EKS_AMI, NVIDIA_DRIVER_ROLE, Fact, Source, fact_table, value

if TYPE_CHECKING:
    from gpunode.distros.base import CrbAccess

_GUIDE = "https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/advanced-options.html"
_PRECOMPILED_KMOD = ("NVIDIA/yum-packaging-precompiled-kmod", "a66bc1285b9c40276273c333e9ac05ac52bc83dd")
_DKMS_NVIDIA = ("NVIDIA/yum-packaging-dkms-nvidia", "b28ed69631673c076b797caeec5fd83c452a6f61")
_DKMS = ("dell/dkms", "793fdab5eba9d6b6e9295b18e44a23824e7da44f")
_ECS = ("aws/amazon-ecs-ami", "a2532d3503f2052a09ac18189b0de33918406db8")

EL = fact_table("el", {
    "crb_subscription": Fact("codeready-builder-for-rhel-{el}-{arch}-rpms",
        DEEPOPS.at("roles/nvidia-dgx/vars/redhat.yml", "25-29"),
        "enabled with `subscription-manager repos --enable` (roles/nvidia-dgx/tasks/redhat-el8-plus.yml:15-21)"),
    "crb_rhui": Fact("codeready-builder-for-rhel-{el}-rhui-rpms", Source(
        "aws/aws-parallelcluster-cookbook",
        "cookbooks/aws-parallelcluster-shared/resources/package_repos/package_repos_redhat8.rb",
        "f75d84c38ecfac1891e5f3e8fe2d424cc3e7448d", "36-39"),
        "RHEL on AWS (RHUI, pay-as-you-go) enables CodeReady Builder with yum-config-manager, not "
        "subscription-manager"),
    "epel_release_rpm": Fact("https://dl.fedoraproject.org/pub/epel/epel-release-latest-{el}.noarch.rpm",
        NVIDIA_DRIVER_ROLE.at("defaults/main.yml", "14")),
    "module_switch": Fact("dnf -y module switch-to nvidia-driver:{stream} --allowerasing", Source(url=_GUIDE),
                          "NVIDIA's guide, 'Switching between Driver Module Flavors', EL 8/9 and Amazon Linux 2023"),
    "module_stream": Fact("{branch}-dkms", NVIDIA_DRIVER_ROLE.at("tasks/install-redhat.yml", "75-77"),
                          "the role installs @nvidia-driver:<branch>-dkms"),
    "module_stream_open": Fact("{branch}-open", Source(
        url="https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/620/kernel-modules.html"),
        "dnf module enable nvidia-driver:<branch>-open (EL 8/9, Amazon Linux 2023)"),
    "open_dkms_renamed_in": Fact("570.148.08",
        EKS_AMI.at("templates/al2023/provisioners/install-nvidia-driver.sh", "127"),
        "the RPM open module is registered as nvidia-open before this version, nvidia from it on"),
    # Precompiled streams (issue 30): `nvidia-driver:<branch>` next to `<branch>-dkms`, proprietary modules only.
    "precompiled_stream": Fact("{branch}", Source(*_PRECOMPILED_KMOD[:1], "README.md", _PRECOMPILED_KMOD[1],
                                                  "53-87"),
                               "streams latest and XXX hold precompiled kmod packages, latest-dkms and XXX-dkms the "
                               "DKMS ones; XXX locks the driver to branch XXX"),
    "precompiled_kmod": Fact("kmod-nvidia-{version}-{kernel}-{release}", Source(
        *_PRECOMPILED_KMOD[:1], "dnf-kmod-nvidia.spec", _PRECOMPILED_KMOD[1], "63"),
        "one package per driver version and kernel (kernel 4.18.0, release 147.5.1 of uname -r "
        "4.18.0-147.5.1.el8_1.x86_64); it requires exactly that kernel (line 98) and conflicts with "
        "kmod-nvidia-latest-dkms (line 99)"),
    "dkms_make_proprietary": Fact(
        "'make' -j2 module SYSSRC=${kernel_source_dir} IGNORE_XEN_PRESENCE=1 IGNORE_PREEMPT_RT_PRESENCE=1 "
        "IGNORE_CC_MISMATCH=1", Source(*_DKMS_NVIDIA[:1], "dkms-nvidia.conf", _DKMS_NVIDIA[1], "5"),
        "MAKE[0] of kmod-nvidia-latest-dkms: two jobs whatever the machine (the quoted 'make' keeps DKMS from adding "
        "its own -j, dell/dkms dkms.in:1462); the open flavour's dkms-open-nvidia.conf:5 runs `make -j` already"),
    "dkms_conf_override": Fact("/etc/dkms/{module}.conf", Source(*_DKMS[:1], "dkms.in", _DKMS[1], "629-640"),
                               "DKMS sources /etc/dkms/<module>.conf after the package's dkms.conf, in a subshell "
                               "(safe_source, 540-563), so its MAKE[0] replaces the package's"),
    # The module cache on RPM (issue 30). No setting makes NVIDIA's %post skip its build: /etc/dkms/no-autoinstall
    # is read only by `dkms autoinstall` (dell/dkms dkms.in:2767-2770) and Debian's postinst (dkms_common.postinst.in:
    # 113-116), and the %post calls `dkms build`/`dkms install` directly. What dkms does honour is a build in place.
    "kmod_post": Fact(("dkms add -m {m} -v {v} -q || :", "dkms build -m {m} -v {v} -q || :",
                       "dkms install -m {m} -v {v} -q --force || :"),
        Source(*_DKMS_NVIDIA[:1], "dkms-nvidia.spec", _DKMS_NVIDIA[1], "62-66"),
        "the %post of kmod-nvidia-latest-dkms (dkms-open-nvidia.spec:77-81 the same for kmod-nvidia-open-dkms; the "
        "rhel8, rhel9 and 535 branches alike): add, build and install at once, for the running kernel (no -k), "
        "every failure ignored; %preun removes all its builds (68-70)"),
    "dkms_skips_built": Fact("/var/lib/dkms/{m}/{v}/{k}/{arch}/module", Source(*_DKMS[:1], "dkms.in", _DKMS[1],
                                                                               "1852-1877"),
        "`dkms build` of a module whose tree has this folder (is_module_built, 1824-1829) says 'already built ... "
        "skip' unless --force; `dkms install --force` only uninstalls an installed one first, and do_install "
        "builds only a module not built (1616-1617); the check is in every dkms since 2010 (commit 6a05ab8)"),
    "dkms_added_by_source": Fact("/var/lib/dkms/{m}/{v}/source", Source(*_DKMS[:1], "dkms.in", _DKMS[1],
                                                                       "1818-1822"),
        "a module is 'added' when this link exists: a build tree placed without it does not stop the %post's "
        "`dkms add` (which refuses only an added module, 1144-1148) from linking the package's source"),
    "kmod_version_query": Fact("--setopt=*.module_hotfixes=true repoquery --latest-limit=1 --queryformat "
                               "'%{{version}}' '{kmod}-{branch}.*'",
        EKS_AMI.at("templates/al2023/provisioners/install-nvidia-driver.sh", "67"),
        "the EKS AMI asks NVIDIA's repository for the branch's newest kmod version before it installs (module "
        "filtering off: the streams hide the others); the dkms streams install that newest version"),
    "dkms_all_cores": Fact("-j$(nproc)", Source(*_ECS[:1], "scripts/al2023/gpu/install-nvidia-driver.sh", _ECS[1],
                                                "14-17"),
                           "the ECS GPU AMI writes MAKE[0] with -j$(nproc --all) to /etc/dkms/nvidia.conf (and removes "
                           "it before the image is taken, 242-244, since the count is written out); awslabs/amazon-eks-"
                           "ami templates/al2023/provisioners/install-nvidia-driver.sh:96-97 does the same"),
})

# NVIDIA's RPM open DKMS module was registered as `nvidia-open` until 570.148.08, `nvidia` from then on
# (awslabs/amazon-eks-ami templates/al2023/provisioners/install-nvidia-driver.sh).
RPM_OPEN_DKMS_RENAMED_IN = value(EL, "open_dkms_renamed_in")
# From R580 NVIDIA's repositories name the fabric manager `nvidia-fabricmanager` on RPM too (before:
# `nvidia-fabric-manager`) and drop the branch from the NSCQ package name.
UNVERSIONED_FM_FROM_BRANCH = 580
# gpunode's own addition to NVIDIA's section: verify TLS against the system bundle (EL and Amazon Linux path).
_YUM_TLS = "sslverify=1\nsslcacert=/etc/pki/tls/certs/ca-bundle.crt\n"


class RpmDistro(Distro):
    """An RPM distro: kernel-devel per kernel, NVIDIA's dnf module (method distro means it too), Docker CE."""

    def kernel_base_package(self, kernel_package: str = "") -> str:
        """The RPM kernel package line: `kernel`, or AL2023's `kernel6.12`/`kernel6.18` (from the facts' owner of
        /lib/modules/<running>, as amazon-eks-ami's al2023 install-nvidia-driver.sh picks it)."""
        return kernel_package or "kernel"

    def headers_packages(self, kernel: str, kernel_package: str = "") -> list[str]:
        return [f"{self.kernel_base_package(kernel_package)}-devel-{kernel}"]

    def newest_kernel_packages(self, running: str, kernel_package: str = "") -> list[str]:
        base = self.kernel_base_package(kernel_package)
        return [base, f"{base}-devel"]

    def kernel_hold_packages(self, kernel: str, kernel_package: str = "", installed: Collection[str] = ()) -> list[str]:
        base = self.kernel_base_package(kernel_package)
        return [base, f"{base}-devel"]

    def nvidia_dnf_module(self, method: str) -> bool:
        return method != "runfile"

    def dkms_module_name(self, method: str, flavor: str, driver_version: str | None) -> str:
        if method == "runfile":
            return "nvidia"
        renamed = driver_version is not None and \
            version_key(driver_version) >= version_key(RPM_OPEN_DKMS_RENAMED_IN)
        return "nvidia-open" if flavor == "open" and not renamed else "nvidia"

    def fabricmanager_packages(self, method: str, branch: int) -> tuple[str, ...]:
        return ("nvidia-fabricmanager", "libnvidia-nscq") if branch >= UNVERSIONED_FM_FROM_BRANCH else \
            ("nvidia-fabric-manager", f"libnvidia-nscq-{branch}")

    def driver_packages(self, method: str, branch: int, flavor: str) -> DriverPackages:
        """EPEL/RPM Fusion are no server drivers: on EL and Amazon Linux "distro" means NVIDIA's dnf module."""
        self.check_supported()
        if method not in ("distro", "cuda-repo"):
            raise ValueError(f"unknown driver method {method!r}")
        if self.os.family not in ("redhat", "amazon"):
            raise UnsupportedDistro(f"no distro driver packages known for {self.os.id}")
        fm = self.fabricmanager_packages(method, branch)
        stream = value(EL, "module_stream_open" if flavor == "open" else "module_stream").format(branch=branch)
        add = self.cuda_repo_setup()
        setup = f"{add} && dnf -y module install nvidia-driver:{stream}"
        kmod = "kmod-nvidia-open-dkms" if flavor == "open" else "kmod-nvidia-latest-dkms"
        pkgs = ("nvidia-driver", "nvidia-driver-cuda", "nvidia-persistenced", kmod)
        return DriverPackages(pkgs, pkgs, "nvidia", fm, setup, version_from="nvidia-driver", module_stream=stream,
                              repo_add=add, switch=value(EL, "module_switch").format(stream=stream))

    def cuda_repo_setup(self) -> str:
        """NVIDIA's .repo file for the release's folder, added with dnf config-manager."""
        repo_file = value(CUDA_REPO, "rpm_repo_file").format(base=self.cuda_repo_base(), repo=self.cuda_repo_name())
        return f"dnf config-manager --add-repo {repo_file}"

    def driver_version_probe(self, pkgs: DriverPackages, branch: int) -> str:
        """The version of the branch's DKMS kmod that NVIDIA's repository would install (EKS AMI's query), through a
        temporary repository and cache: nothing on the host changes. "" for a precompiled kmod (its version is
        pinned) or without a repository."""
        if not pkgs.dkms_module or not pkgs.repo_add:
            return ""
        base = pkgs.repo_add.rsplit(" ", 1)[-1].rsplit("/", 1)[0]
        query = value(EL, "kmod_version_query").format(kmod=pkgs.packages[-1], branch=branch)
        return (f"t=$(mktemp -d) && dnf -q --setopt=cachedir=\"$t\" --repofrompath=gpunode-nvidia,{base} "
                f"--repo=gpunode-nvidia {query} 2>/dev/null | sort -V | tail -1; rm -rf \"$t\"")

    def kmod_packages(self, branch: int, kmod: str) -> DriverPackages:
        """NVIDIA's precompiled stream nvidia-driver:<branch> with the kmod package built for one kernel, the driver
        pinned to the kmod's version (`module enable`, not `module install`: the stream's default profile would
        take the kmod of the newest kernel, and that kernel with it)."""
        dkms = self.driver_packages("cuda-repo", branch, "proprietary")
        stream = value(EL, "precompiled_stream").format(branch=branch)
        version = kmod.removeprefix("kmod-nvidia-").split("-", 1)[0]
        pkgs = (*dkms.packages[:-1], kmod)
        return DriverPackages(pkgs, pkgs, "", dkms.fabricmanager, f"{dkms.repo_add} && dnf -y module enable "
                              f"nvidia-driver:{stream}", version_from="nvidia-driver", module_stream=stream,
                              repo_add=dkms.repo_add, version=version,
                              switch=value(EL, "module_switch").format(stream=stream))

    def docker_packages(self) -> tuple[str, ...]:
        return DOCKER_CE_PACKAGES

    def docker_repo_file(self) -> tuple[str, str] | None:
        """Docker's repository on EL-compatible hosts: Docker's RHEL tree, the one it maintains for EL 8, 9 and 10
        (its CentOS tree is kept for CentOS Stream 9 and 10 only: no el8). The major is written out instead of
        $releasever: on Alibaba Cloud Linux 3 and TencentOS, $releasever is 3 or 4, for which Docker publishes
        nothing."""
        el = self.el_major()
        if el is None:
            return None
        if el not in value(DOCKER, "rhel_maintained"):
            raise UnsupportedDistro(f"Docker maintains no repository for EL {el} (its RHEL tree: EL "
                                    f"{', '.join(map(str, value(DOCKER, 'rhel_maintained')))})",
                                    fix="install_docker: false (Kubernetes nodes run containerd), or install an "
                                    "engine yourself first: gpunode keeps an engine it finds")
        url = value(DOCKER, "rhel_repo_base")
        return ("/etc/yum.repos.d/docker-ce.repo",
                f"[docker-ce-stable]\nname=Docker CE Stable - $basearch\nbaseurl={url}/{el}/$basearch/stable\n"
                f"enabled=1\ngpgcheck=1\ngpgkey={url}/gpg\n")

    def toolkit_repo_file(self, repo_url: str) -> tuple[str, str]:
        url = repo_url.rstrip("/")
        return (value(TOOLKIT, "yum_repo"), value(TOOLKIT, "yum_section").format(url=url) + _YUM_TLS)

    def cuda_repo_name(self) -> str:
        """EL clones use the repository of the RHEL major they follow: Alibaba Cloud Linux 3 and TencentOS 3 ->
        the EL 8 folder, TencentOS 4 -> EL 9 (NVIDIA publishes none of their own; their kernels are EL-ABI
        compatible and the packages are DKMS builds, compiled on the host against its own kernel-devel)."""
        el = self.el_major()
        if el:
            return value(CUDA_REPO, "rhel_folder").format(major=el)
        return super().cuda_repo_name()

    def epel(self) -> str:
        """Shell installing EPEL's release RPM for the EL major, unless installed."""
        epel_rpm = value(EL, "epel_release_rpm").format(el=self.el_major())
        return f"{{ rpm -q epel-release >/dev/null || dnf -y install {epel_rpm}; }}"

    def extra_repos(self, pkg: CrbAccess | None = None) -> str:
        """EPEL (dkms) and the CodeReady Builder / PowerTools repository its packages depend on; "" without an EL
        major. An EL clone whose $releasever is its own numbering cannot use EPEL's release RPM."""
        el = self.el_major()
        if el is None:
            return ""
        raise UnsupportedDistro(
            f"{self.os.pretty_name or self.os.id}: EPEL's release RPM for EL {el} reads $releasever, which is "
            f"{self.os.version_major} here, so EPEL (where dkms comes from) would point at a release that does not "
            "exist",
            fix="install dkms from a repository you trust first (gpunode then enables no repository), or use "
            "method: runfile with dkms installed")


def precompiled_kmods(names: list[str] | set[str], branch: int, kernel: str) -> list[str]:
    """The precompiled kmod packages of `branch` for `kernel` among `names`, newest first."""
    stem = el_kernel_stem(kernel)
    found = [n for n in names if n.startswith(f"kmod-nvidia-{branch}.") and n.endswith(f"-{stem}")]
    return sorted(found, key=version_key, reverse=True) if stem else []

