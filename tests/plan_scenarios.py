"""Writes tests/plans/*/*.json from scenario definitions and the current planner: `python -m tests.plan_scenarios`.

A scenario is a host state (os-release, facts, the probe output a real host of that distro prints) and the
arguments base.yml / gpu-node.yml give a step. The planner's answer is frozen into the case's `expected`;
every command was then read against the case's anchor (the vendor file named in it) before being committed.
Refreshing rewrites `expected`: review the diff (`git diff tests/plans`) against the anchors before committing.
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys
from dataclasses import dataclass, field
from typing import Any

from gpunode.steps.nvidia import DKMS_JOBS_CONTENT
from gpunode.steps.probe import nested
from tests.plan_cases import CASES_DIR, run_case

# ---- anchors: the vendor files the commands were checked against ---------------------------------------------
A = {
    "ubuntu_driver": ("NVIDIA/ansible-role-nvidia-driver", "defaults/main.yml",
                      "nvidia-headless-<branch>-server + nvidia-utils-<branch>-server (Canonical's archive)"),
    "ubuntu_headers": ("NVIDIA/gpu-driver-container", "ubuntu22.04/nvidia-driver",
                       "apt-get install --no-install-recommends linux-headers-${KERNEL_VERSION}"),
    "ubuntu2404_headers": ("NVIDIA/gpu-driver-container", "ubuntu24.04/nvidia-driver",
                           "apt-get install --no-install-recommends linux-headers-${KERNEL_VERSION}"),
    "ubuntu_fm": ("NVIDIA/gpu-driver-container", "ubuntu22.04/install.sh",
                  "nvidia-fabricmanager=${DRIVER_VERSION}* and libnvidia-nscq=${DRIVER_VERSION}*, then apt-mark hold"),
    "dgx_ubuntu": ("NVIDIA/deepops", "roles/nvidia-dgx/vars/ubuntu-22.04.yml",
                   "nvidia-fabricmanager-<branch>, libnvidia-nscq-<branch>"),
    "el_role": ("NVIDIA/ansible-role-nvidia-driver", "tasks/install-redhat.yml",
                "kernel-devel-{{ ansible_kernel }} (else kernel + kernel-devel latest and reboot), EPEL, dkms, "
                "@nvidia-driver:<branch>-dkms from the cuda rhel<N> repository"),
    "el_headers": ("NVIDIA/gpu-driver-container", "rhel9/nvidia-driver",
                   "dnf install kernel-headers-${KERNEL_VERSION} kernel-devel-${KERNEL_VERSION}"),
    "el_dgx": ("NVIDIA/deepops", "roles/nvidia-dgx/tasks/redhat-el8-plus.yml",
               "subscription-manager repos --enable (codeready-builder-for-rhel-N-x86_64-rpms), Rocky "
               "`dnf config-manager --set-enabled crb`, module nvidia-driver:<stream>, docker-ce"),
    "el_dgx_vars": ("NVIDIA/deepops", "roles/nvidia-dgx/vars/redhat.yml",
                    "libnvidia-nscq-<branch>, nvidia-fabricmanager.service"),
    "al2023": ("awslabs/amazon-eks-ami", "templates/al2023/provisioners/install-nvidia-driver.sh",
               "cuda-amzn2023.repo, kernel/kernel6.12 -devel -modules-extra, dnf versionlock, dkms, "
               "kmod-nvidia-*-dkms, nvidia-fabric-manager-<full version> before 580, DKMS name nvidia-open "
               "before 570.148.08, systemctl enable nvidia-fabricmanager / nvidia-persistenced"),
    "al2": ("awslabs/amazon-eks-ami", "templates/al2/provisioners/install-nvidia-driver.sh (history, before "
            "b2289030 'chore: remove AL2 support')", "AL2 used yum and yum versionlock; refused now (end of support)"),
    "runfile": ("NVIDIA/gpu-driver-container", "rhel9/nvidia-driver",
                "nvidia-installer ... -m=${KERNEL_TYPE} (kernel or kernel-open)"),
    "runfile_al2": ("awslabs/amazon-eks-ami", "templates/al2/provisioners/install-nvidia-driver.sh (history)",
                    "yum install gcc make dkms before the runfile; --kernel-module-type proprietary|open --dkms"),
    "toolkit": ("NVIDIA/cloud-native-docs", "container-toolkit/install-guide.md",
                "gpgkey | gpg --dearmor -o /usr/share/keyrings/nvidia-container-toolkit-keyring.gpg, signed-by "
                "list; nvidia-container-toolkit.repo; the four packages at one version"),
    "runtime": ("NVIDIA/cloud-native-docs", "container-toolkit/install-guide.md",
                "nvidia-ctk runtime configure --runtime=docker|containerd: a `nvidia` runtime whose path is "
                "nvidia-container-runtime (merged into daemon.json / a containerd config)"),
    "dgx_unattended": ("NVIDIA/deepops", "roles/nvidia-dgx/tasks/ubuntu-22.04.yml",
                       "no unattended upgrades on GPU nodes (unattended-upgrades removed)"),
    "eks_worker": ("awslabs/amazon-eks-ami", "templates/al2023/provisioners/install-worker.sh",
                   "base tools installed with dnf before the node components"),
}


def anchor(key: str) -> dict[str, str]:
    repository, path, checked = A[key]
    return {"repository": repository, "path": path, "checked": checked}


# ---- what hosts print --------------------------------------------------------------------------------------
def file_probe(content: str | None, mode: str = "644") -> str:
    """The output of remote_file.probe_file for a file with `content` (None: absent)."""
    if content is None:
        return "absent\n"
    data = content.encode()
    return (f"present\n{mode} root root\n{hashlib.sha256(data).hexdigest()}\n"
            f"base64:{base64.b64encode(data).decode()}\n")


def apt_pkgs(installed: dict[str, str], lists: bool = True) -> dict[str, str]:
    """What AptManager's probe sections print."""
    lines = "".join(f"{n}\tii \t{v}\n" for n, v in installed.items())
    return {"installed": lines, "lists": "9\n1795316241\n1795316250\n" if lists else "0\n1795316250\n"}


def rpm_pkgs(installed: dict[str, str]) -> dict[str, str]:
    """What DnfManager's probe section prints."""
    return {"installed": "".join(f"{n}\t{v}\n" for n, v in installed.items())}


def driver_probe(nouveau: str, dkms: str, held: str, persistenced: str, pkgs: dict[str, str],
                 unit: str | None = None) -> dict[str, str]:
    """nvidia_driver's probe sections."""
    sections = {"nouveau": nouveau, "dkms": dkms, "held": held, "persistenced": persistenced}
    if unit is not None:
        sections["unit"] = unit
    return {**sections, **nested("pkgs", pkgs)}


@dataclass
class Distro:
    """One distribution release as the clouds run it, with the versions its repositories have."""

    key: str
    os_release: str
    kernel: str
    apt: bool
    driver: dict[str, str]              # package -> installed version on a converged host
    dkms: str                           # `dkms status` line of a converged host
    held: str                           # the held-list output of a converged host
    docker: dict[str, str]
    containerd: str                     # `containerd --version`
    headers_anchor: str
    driver_anchor: str
    kernel_package: str = ""
    branch: int = 535
    refused: bool = False
    extra_facts: dict[str, Any] = field(default_factory=dict)


def rpm_driver(ver: str, rel: str, open_: bool = False) -> dict[str, str]:
    kmod = "kmod-nvidia-open-dkms" if open_ else "kmod-nvidia-latest-dkms"
    return {p: f"{ver}-{rel}" for p in ("nvidia-driver", "nvidia-driver-cuda", "nvidia-persistenced", kmod)}


def versionlock(pkgs: dict[str, str]) -> str:
    return "".join(f"{n}-3:{v}.*\n" for n, v in pkgs.items())


UBU = "535.183.01-0ubuntu0.22.04.1"
UBU24 = "535.183.01-0ubuntu0.24.04.1"
EL9 = rpm_driver("550.163.01", "1.el9")
EL8 = rpm_driver("550.163.01", "1.el8")
AMZ = rpm_driver("550.163.01", "1.amzn2023")
DEB12 = {"nvidia-kernel-dkms": "535.216.01-1~deb12u1", "nvidia-smi": "535.216.01-1~deb12u1",
         "libcuda1": "535.216.01-1~deb12u1", "libnvidia-ml1": "535.216.01-1~deb12u1",
         "nvidia-persistenced": "535.171.04-1", "firmware-nvidia-gsp": "535.216.01-1~deb12u1"}
DEB13 = {"nvidia-kernel-dkms": "550.163.01-2", "nvidia-smi": "550.163.01-2", "libcuda1": "550.163.01-2",
         "libnvidia-ml1": "550.163.01-2", "nvidia-persistenced": "550.54.14-1", "firmware-nvidia-gsp": "550.163.01-2"}
DEB_HELD12 = "firmware-nvidia-gsp\nlibcuda1\nlibnvidia-ml1\nnvidia-kernel-dkms\nnvidia-smi\n"


def ubuntu_driver(version: str) -> dict[str, str]:
    return {"nvidia-headless-535-server": version, "nvidia-utils-535-server": version}


# RHEL registered with subscription-manager, as deepops' roles assume (RHUI hosts: tests/plans hand-written cases)
REGISTERED = {"pkg": {"rhsm_registered": True}}

DISTROS = [
    Distro("ubuntu2204", "ubuntu-22.04.txt", "6.8.0-1015-aws", True, ubuntu_driver(UBU),
           "nvidia-srv/535.183.01, 6.8.0-1015-aws, x86_64: installed",
           "nvidia-headless-535-server\nnvidia-utils-535-server\n", {"docker.io": "24.0.7-0ubuntu2~22.04.1"},
           "containerd github.com/containerd/containerd 1.7.12", "ubuntu_headers", "ubuntu_driver"),
    Distro("ubuntu2404", "ubuntu-24.04.txt", "6.8.0-1021-aws", True, ubuntu_driver(UBU24),
           "nvidia-srv/535.183.01, 6.8.0-1021-aws, x86_64: installed",
           "nvidia-headless-535-server\nnvidia-utils-535-server\n", {"docker.io": "26.1.3-0ubuntu1~24.04.1"},
           "containerd github.com/containerd/containerd 1.7.24", "ubuntu2404_headers", "ubuntu_driver"),
    Distro("debian12", "debian-12.txt", "6.1.0-27-cloud-amd64", True, DEB12,
           "nvidia-current/535.216.01, 6.1.0-27-cloud-amd64, x86_64: installed", DEB_HELD12,
           {"docker.io": "20.10.24+dfsg1-1+b3"}, "containerd github.com/containerd/containerd 1.6.20~ds1",
           "ubuntu_headers", "ubuntu_driver"),
    Distro("debian13", "debian-13.txt", "6.12.48+deb13-cloud-amd64", True, DEB13,
           "nvidia-current/550.163.01, 6.12.48+deb13-cloud-amd64, x86_64: installed", DEB_HELD12,
           {"docker.io": "26.1.5+dfsg1-9+b9"}, "containerd github.com/containerd/containerd 1.7.24~ds1",
           "ubuntu_headers", "ubuntu_driver", branch=550),
    Distro("rocky9", "rocky-9.txt", "5.14.0-427.13.1.el9_4.x86_64", False, EL9,
           "nvidia/550.163.01, 5.14.0-427.13.1.el9_4.x86_64, x86_64: installed", versionlock(EL9),
           {"docker-ce": "27.3.1-1.el9"}, "containerd containerd.io 1.7.22 7f7fdf5fed64eb6a7caf99b3e12efcf9d60e311c",
           "el_headers", "el_role", branch=550),
    Distro("rhel9", "rhel-9.txt", "5.14.0-570.12.1.el9_6.x86_64", False, EL9,
           "nvidia/550.163.01, 5.14.0-570.12.1.el9_6.x86_64, x86_64: installed", versionlock(EL9),
           {"docker-ce": "27.3.1-1.el9"}, "containerd containerd.io 1.7.22 7f7fdf5fed64eb6a7caf99b3e12efcf9d60e311c",
           "el_headers", "el_role", branch=550, extra_facts=REGISTERED),
    Distro("rhel8", "rhel-8.txt", "4.18.0-425.3.1.el8.x86_64", False, EL8,
           "nvidia/550.163.01, 4.18.0-425.3.1.el8.x86_64, x86_64: installed", versionlock(EL8),
           {"docker-ce": "26.1.3-1.el8"}, "containerd containerd.io 1.6.32 8b3b7ca2e5ce38e8f31a34f35b2b68ceb8470d89",
           "el_headers", "el_role", branch=550, extra_facts=REGISTERED),
    Distro("al2023", "amzn-2023.txt", "6.1.109-118.189.amzn2023.x86_64", False, AMZ,
           "nvidia/550.163.01, 6.1.109-118.189.amzn2023.x86_64, x86_64: installed", versionlock(AMZ),
           {"docker": "25.0.6-1.amzn2023.0.2"}, "containerd github.com/containerd/containerd 1.7.22",
           "al2023", "al2023", kernel_package="kernel", branch=550),
    Distro("al2023-k612", "amzn-2023.txt", "6.12.40-63.114.amzn2023.x86_64", False, AMZ,
           "nvidia/550.163.01, 6.12.40-63.114.amzn2023.x86_64, x86_64: installed", versionlock(AMZ),
           {"docker": "25.0.8-1.amzn2023.0.4"}, "containerd github.com/containerd/containerd 1.7.27",
           "al2023", "al2023", kernel_package="kernel6.12", branch=550),
    Distro("al2", "amzn-2.txt", "5.10.225-213.878.amzn2.x86_64", False, {}, "", "", {"docker": "25.0.6-1.amzn2.0.2"},
           "containerd github.com/containerd/containerd 1.7.22", "al2", "al2", kernel_package="kernel",
           refused=True),
    Distro("alinux3", "alinux-3.txt", "5.10.134-16.1.al8.x86_64", False, EL8,
           "nvidia/550.163.01, 5.10.134-16.1.al8.x86_64, x86_64: installed", versionlock(EL8),
           {"docker-ce": "26.1.3-1.el8"}, "containerd containerd.io 1.6.32 8b3b7ca2e5ce38e8f31a34f35b2b68ceb8470d89",
           "el_headers", "el_role", branch=550),
    Distro("tencentos3", "tencentos-3.txt", "5.4.119-19.0009.44", False, EL8,
           "nvidia/550.163.01, 5.4.119-19.0009.44, x86_64: installed", versionlock(EL8),
           {"docker-ce": "26.1.3-1.el8"}, "containerd containerd.io 1.6.32 8b3b7ca2e5ce38e8f31a34f35b2b68ceb8470d89",
           "el_headers", "el_role", branch=550),
    Distro("tencentos4", "tencentos-4.txt", "6.6.47-12.tl4.x86_64", False, EL9,
           "nvidia/550.163.01, 6.6.47-12.tl4.x86_64, x86_64: installed", versionlock(EL9),
           {"docker-ce": "27.3.1-1.el9"}, "containerd containerd.io 1.7.22 7f7fdf5fed64eb6a7caf99b3e12efcf9d60e311c",
           "el_headers", "el_role", branch=550),
]

NOUVEAU = ("# Written by gpunode: the NVIDIA driver cannot load while nouveau holds the GPU.\n"
           "blacklist nouveau\noptions nouveau modeset=0\n")
H100 = {"slot": "0000:18:00.0", "device_id": "0x2330", "class_code": "0x030200"}
V100 = {"slot": "0000:00:1e.0", "device_id": "0x1db1", "class_code": "0x030200"}
NVSWITCH = {"slot": "0000:05:00.0", "device_id": "0x22a3", "class_code": "0x068000", "is_nvswitch": True}
TOOLKIT = ("nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container-tools",
           "libnvidia-container1")


class Writer:
    """Collects cases and writes them as JSON files (expected computed by the planner)."""

    def __init__(self) -> None:
        self.count = 0

    def case(self, step: str, name: str, d: Distro, *, description: str, args: dict[str, Any],
             probe_output: dict[str, str] | None = None, facts: dict[str, Any] | None = None,
             shared: dict[str, Any] | None = None,
             anchor_key: str, reboot_required_before: bool = False) -> dict[str, Any]:
        spec = {"kernel": {"running": d.kernel, "package": d.kernel_package, "running_headers_present": True,
                           "installed": [d.kernel], "headers": [d.kernel]}, "gpus": [H100]}
        spec.update(d.extra_facts)
        for key, value in (facts or {}).items():
            spec[key] = {**spec.get(key, {}), **value} if isinstance(value, dict) else value
        case: dict[str, Any] = {"description": description, "anchor": anchor(anchor_key),
                                "os_release": d.os_release, "facts": spec, "step": step, "args": args}
        if shared:
            case["shared"] = shared
        if reboot_required_before:
            case["reboot_required_before"] = True
        case["probe_output"] = probe_output or {}
        case["expected"] = run_case(case)
        path = CASES_DIR / step / f"{d.key}-{name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(case, indent=2, ensure_ascii=False) + "\n")
        self.count += 1
        return case


def pkgs_out(d: Distro, installed: dict[str, str]) -> dict[str, str]:
    return apt_pkgs(installed) if d.apt else rpm_pkgs(installed)


def wait_cases(w: Writer, d: Distro) -> None:
    pm_anchor = "eks_worker" if not d.apt else "dgx_unattended"
    holder = {"path": "/var/lib/dpkg/lock-frontend" if d.apt else "/var/lib/rpm/.rpm.lock", "pid": 812,
              "command": "/usr/bin/unattended-upgrade" if d.apt else "/usr/bin/dnf makecache --timer"}
    w.case("wait_for_package_manager", "fresh", d, description="first boot: cloud-init and a package manager "
           "still run, so the wait is planned", args={"timeout": 900}, anchor_key=pm_anchor,
           facts={"pkg": {"cloud_init_running": True, "lock_holders": [holder]}})
    w.case("wait_for_package_manager", "converged", d, description="nothing holds the package manager",
           args={"timeout": 900}, anchor_key=pm_anchor)


def kernel_cases(w: Writer, d: Distro) -> None:
    key = d.headers_anchor
    held_none = {"held": "\n"}
    debian_probe = {"headers": f"{'6.8.0-1015.17~22.04.1' if d.key.startswith('ubuntu') else '6.1.115-1'}\n"}
    fresh_probe = debian_probe if d.apt else {}
    no_headers = {"kernel": {"running_headers_present": False, "headers": []}}
    w.case("kernel_headers", "fresh", d, description="no headers for the running kernel: install them "
           "(policy require, the playbook's default)", args={"policy": "require", "hold": False},
           probe_output=fresh_probe, facts=no_headers, anchor_key=key)
    w.case("kernel_headers", "converged", d, description="headers for the running kernel are installed",
           args={"policy": "require", "hold": False}, anchor_key=key)
    hold_anchor = "al2023" if d.key.startswith("al2023") else ("el_dgx" if not d.apt else "ubuntu_fm")
    w.case("kernel_headers", "hold-fresh", d, description="hold_kernel: the kernel the driver is built for is "
           "held (apt-mark / dnf versionlock)", args={"policy": "require", "hold": True},
           probe_output=held_none, anchor_key=hold_anchor)
    if d.apt:
        held = f"linux-headers-{d.kernel}\nlinux-image-{d.kernel}\n"
    else:
        base = d.kernel_package or "kernel"
        ver = d.kernel.rsplit(".", 1)[0]
        held = f"{base}-0:{ver}.*\n{base}-devel-0:{ver}.*\n"
    w.case("kernel_headers", "hold-converged", d, description="the kernel is already held: nothing to do",
           args={"policy": "require", "hold": True}, probe_output={"held": held}, anchor_key=hold_anchor)
    newer = {"kernel": {"running_headers_present": False, "headers": [], "installed": [d.kernel]}}
    w.case("kernel_headers", "upgrade-fresh", d, description="policy upgrade: the newest distro kernel of the "
           "running line with its headers, then a reboot", args={"policy": "upgrade", "hold": False},
           probe_output=fresh_probe, facts=newer, anchor_key="el_role" if not d.apt else key)
    pending = "6.8.0-1018-aws" if d.key.startswith("ubuntu") else (
        "6.1.0-28-cloud-amd64" if d.key == "debian12" else "6.12.57+deb13-cloud-amd64" if d.key == "debian13"
        else d.kernel.replace(".x86_64", ".1.x86_64") if d.kernel.endswith(".x86_64") else d.kernel + ".1")
    w.case("kernel_headers", "upgrade-half-converged", d, description="a previous run installed a newer kernel "
           "with headers; the reboot is pending: modules target it, nothing is installed again",
           args={"policy": "upgrade", "hold": False}, probe_output=fresh_probe, anchor_key=key,
           facts={"kernel": {"running_headers_present": False, "installed": [d.kernel, pending],
                             "headers": [pending]}})
    if d.apt:
        w.case("kernel_headers", "missing-require", d, description="a kernel the distro has no headers for "
               "(a vendor kernel): policy require stops before anything is installed (check mode too)",
               args={"policy": "require", "hold": False},
               probe_output={"headers": "(none)\nlinux-headers-6.1.0-26-cloud-amd64\n"
                                        "linux-headers-6.1.0-27-cloud-amd64\n"},
               facts={"kernel": {"running": "6.18.44-fc-v445", "running_headers_present": False, "headers": [],
                                 "installed": []}}, anchor_key=key)


def driver_cases(w: Writer, d: Distro) -> None:
    args = {"method": "distro", "branch": d.branch, "kernel_modules": "auto", "fabricmanager": "auto",
            "allow_secure_boot": False, "runfile": None}
    key = d.driver_anchor
    fresh = driver_probe("absent\n", "", "", "disabled\n", pkgs_out(d, {}))
    w.case("nvidia_driver", "fresh", d, description=f"nothing installed: nouveau blacklisted, the {d.branch} "
           "driver (DKMS) installed, held, nvidia-persistenced enabled", args=args, probe_output=fresh,
           anchor_key=key)
    # a host converged by this version has the DKMS make-jobs file (RPM, proprietary modules)
    jobs = {} if d.apt else {"dkms_conf": file_probe(DKMS_JOBS_CONTENT)}
    conv = {**driver_probe(file_probe(NOUVEAU), f"{d.dkms}\n", d.held, "enabled\n", pkgs_out(d, d.driver)), **jobs}
    w.case("nvidia_driver", "converged", d, description="driver installed, built for the kernel, held, "
           "nvidia-persistenced enabled: nothing to do", args=args, probe_output=conv, anchor_key=key)
    if d.refused:
        return
    half = {**driver_probe(file_probe(NOUVEAU), "", "", "enabled\n", pkgs_out(d, d.driver)), **jobs}
    w.case("nvidia_driver", "half-converged", d, description="packages installed by an interrupted run: the "
           "DKMS build for the target kernel and the hold are still missing", args=args, probe_output=half,
           anchor_key=key)
    if d.key == "debian12":
        return
    w.case("nvidia_driver", "open-fresh", d, description="kernel_modules: open on a fresh host", anchor_key=key,
           args={**args, "kernel_modules": "open"}, probe_output=fresh)
    if not d.apt:
        open_pkgs = rpm_driver("550.163.01", d.driver["nvidia-driver"].split("-", 1)[1], open_=True)
        conv_open = driver_probe(file_probe(NOUVEAU), f"{d.dkms.replace('nvidia/', 'nvidia-open/')}\n",
                                 versionlock(open_pkgs), "enabled\n", rpm_pkgs(open_pkgs))
        w.case("nvidia_driver", "open-converged", d, description="open modules before 570.148.08: the RPM "
               "registers the DKMS module as nvidia-open, which counts as built", anchor_key="al2023",
               args={**args, "kernel_modules": "open"}, probe_output=conv_open)
        new = rpm_driver("570.172.08", open_pkgs["nvidia-driver"].split("-", 1)[1], open_=True)
        conv_new = driver_probe(file_probe(NOUVEAU), f"{d.dkms.replace('nvidia/550.163.01', 'nvidia/570.172.08')}\n",
                                versionlock(new), "enabled\n", rpm_pkgs(new))
        w.case("nvidia_driver", "open-570-converged", d, description="open modules from 570.148.08 on are "
               "registered as nvidia", anchor_key="al2023", args={**args, "branch": 570, "kernel_modules": "open"},
               probe_output=conv_new)
        w.case("nvidia_driver", "v100-auto-proprietary", d, description="a V100 (pre-Turing) with branch 550: "
               "auto picks the proprietary modules", anchor_key=key, args=args, probe_output=fresh,
               facts={"gpus": [V100]})
    if d.key.startswith("ubuntu") or d.key in ("rocky9", "al2023"):
        w.case("nvidia_driver", "cuda-repo-fresh", d, description="method cuda-repo: NVIDIA's repository, "
               "then its driver packages", anchor_key="al2023" if d.key == "al2023" else key,
               args={**args, "method": "cuda-repo"}, probe_output=fresh)
        fm_fresh = fresh
        fm_anchor = "ubuntu_fm" if d.apt else "al2023"
        w.case("nvidia_driver", "fabricmanager-fresh", d, description="NVSwitches: fabric manager and NSCQ at "
               "exactly the driver's version on the first run, held with the driver", anchor_key=fm_anchor,
               args=args, probe_output=fm_fresh, facts={"gpus": [H100, NVSWITCH]})
        fm_names = ["nvidia-fabricmanager-535", "libnvidia-nscq-535"] if d.apt else \
            ["nvidia-fabric-manager", "libnvidia-nscq-550"]
        ver = d.driver[next(iter(d.driver))] if d.apt else d.driver["nvidia-driver"]
        fm_pkgs = {**d.driver, **dict.fromkeys(fm_names, ver)}
        held = d.held + ("".join(f"{n}\n" for n in fm_names) if d.apt else versionlock(dict.fromkeys(fm_names, ver)))
        fm_conv = {**driver_probe(file_probe(NOUVEAU), f"{d.dkms}\n", held, "enabled\n", pkgs_out(d, fm_pkgs)),
                   **jobs}
        w.case("nvidia_driver", "fabricmanager-converged", d, description="fabric manager at the driver's "
               "version and held: not planned again", anchor_key=fm_anchor, args=args, probe_output=fm_conv,
               facts={"gpus": [H100, NVSWITCH]})
    if d.key in ("rocky9", "ubuntu2204", "debian13", "al2023-k612"):
        unit_absent = "absent\n"
        rf = {**args, "branch": 550, "method": "runfile", "runfile": "https://example.com/NVIDIA-Linux-x86_64-550.163.01.run"}
        runfile_fresh = driver_probe("absent\n", "", "", "", pkgs_out(d, {}), unit=unit_absent)
        w.case("nvidia_driver", "runfile-fresh", d, description="method runfile: build tools first, the module "
               "type given explicitly, a unit for nvidia-persistenced", anchor_key="runfile", args=rf,
               probe_output=runfile_fresh)
        w.case("nvidia_driver", "runfile-open-fresh", d, description="method runfile with kernel_modules: open "
               "(-m=kernel-open)", anchor_key="runfile", args={**rf, "kernel_modules": "open"},
               probe_output=runfile_fresh)
        tools = {"gcc": "12", "make": "4.3", "dkms": "3.0.10"}
        from gpunode.steps.nvidia import PERSISTENCED_CONTENT
        runfile_conv = driver_probe(file_probe(NOUVEAU), f"nvidia/550.163.01, {d.kernel}, x86_64: installed\n", "",
                                    "enabled\n", pkgs_out(d, tools), unit=file_probe(PERSISTENCED_CONTENT))
        w.case("nvidia_driver", "runfile-converged", d, description="the runfile's driver is loaded at the "
               "branch: nothing to do", anchor_key="runfile_al2", args=rf, probe_output=runfile_conv,
               facts={"nvidia": {"driver_version": "550.163.01"}})


def reboot_cases(w: Writer, d: Distro) -> None:
    w.case("reboot", "fresh", d, description="a new kernel was installed by kernel_headers: reboot now",
           args={"mode": "now"}, reboot_required_before=True,
           shared={"reboot_reasons": ["new kernel installed"]}, anchor_key="el_role")
    w.case("reboot", "defer", d, description="image baking (reboot: defer): the reboot is left to the next boot",
           args={"mode": "defer"}, reboot_required_before=True,
           shared={"reboot_reasons": ["new kernel installed"]}, anchor_key="el_role")
    w.case("reboot", "converged", d, description="nothing asks for a reboot", args={"mode": "now"},
           anchor_key="el_role")


def docker_cases(w: Writer, d: Distro) -> None:
    key = "el_dgx" if not d.apt and not d.key.startswith("al") else "runtime"
    repo = {"repo": "absent\n"} if key == "el_dgx" else {}
    w.case("docker", "fresh", d, description="no Docker engine: the distro's (Docker's docker-ce on EL)",
           args={}, probe_output={"status": "ActiveState=inactive\nUnitFileState=\n", **repo}, anchor_key=key)
    w.case("docker", "converged", d, description="Docker installed, enabled and running", args={},
           probe_output={"status": "ActiveState=active\nUnitFileState=enabled\n/usr/bin/dockerd\n/usr/bin/docker\n",
                         **repo},
           facts={"containers": {"docker_installed": True}}, anchor_key=key)
    w.case("docker", "half-converged", d, description="Docker installed but disabled and stopped", args={},
           probe_output={"status": "ActiveState=inactive\nUnitFileState=disabled\n/usr/bin/dockerd\n"
                                   "/usr/bin/docker\n", **repo},
           facts={"containers": {"docker_installed": True}}, anchor_key=key)


def toolkit_cases(w: Writer, d: Distro) -> None:
    args = {"version": None, "repo_url": "https://nvidia.github.io/libnvidia-container"}
    fresh = {"repo": "absent\n", "extra": "", **nested("pkgs", pkgs_out(d, {}))}
    first = w.case("container_toolkit", "fresh", d, description="NVIDIA's repository and the four toolkit "
                   "packages", args=args, probe_output=fresh, anchor_key="toolkit")
    writes = [a for a in first["expected"]["actions"] if a.get("stdin")]
    repo_text = writes[0]["stdin"] if writes else None
    ver = "1.17.8-1" if d.apt else "1.17.8-1"
    extra = "keyring\n" if d.apt else ""
    conv = {"repo": file_probe(repo_text), "extra": extra, **nested("pkgs", pkgs_out(d, dict.fromkeys(TOOLKIT, ver)))}
    w.case("container_toolkit", "converged", d, description="repository and packages in place: nothing",
           args=args, probe_output=conv, anchor_key="toolkit")
    mixed = {**dict.fromkeys(TOOLKIT, ver), "nvidia-container-toolkit": "1.17.9-1"}
    w.case("container_toolkit", "half-converged", d, description="packages on mixed versions after a partial "
           "upgrade: all four again", args=args, anchor_key="toolkit",
           probe_output={"repo": file_probe(repo_text), "extra": extra, **nested("pkgs", pkgs_out(d, mixed))})


def runtime_probe(daemon: str | None) -> dict[str, str]:
    """container_runtime's probe sections: daemon.json as given, no containerd, no toolkit."""
    return {"daemon": file_probe(daemon), "main": "absent\n", "dropin": "absent\n", "version": "", "dump": "",
            "default": "", "ctk": "", "cdi": ""}


def runtime_cases(w: Writer, d: Distro) -> None:
    """Docker's side only: containerd's is planned from `containerd config dump` (tests/test_containerd_*)."""
    docker_args = {"containerd": "no", "default_runtime": False, "cdi": False}
    first = w.case("container_runtime", "docker-fresh", d, description="the nvidia runtime merged into "
                   "daemon.json", args=docker_args, probe_output=runtime_probe(None), anchor_key="runtime")
    daemon = first["expected"]["actions"][0]["stdin"]
    w.case("container_runtime", "docker-converged", d, description="daemon.json already names the runtime",
           args=docker_args, probe_output=runtime_probe(daemon), anchor_key="runtime")
    user = '{"log-driver": "json-file", "log-opts": {"max-size": "100m"}}\n'
    w.case("container_runtime", "docker-half-converged", d, description="a daemon.json with the user's own keys: "
           "the runtime is merged in, every key kept", args=docker_args, probe_output=runtime_probe(user),
           anchor_key="runtime")


def base_cases(w: Writer, d: Distro) -> None:
    names = ["ca-certificates", "curl", "gnupg", "jq", "pciutils"]
    args = {"names": names}
    key = "eks_worker" if not d.apt else "dgx_unattended"
    w.case("packages", "fresh", d, description="base.yml's base packages on a fresh image", args=args,
           probe_output=pkgs_out(d, {"ca-certificates": "1", "curl": "7"}), anchor_key=key)
    w.case("packages", "converged", d, description="base packages installed", args=args, anchor_key=key,
           probe_output=pkgs_out(d, dict.fromkeys(names, "1")))
    journald = "[Journal]\n#Storage=auto\n#SystemMaxUse=\n"
    line_args = {"path": "/etc/systemd/journald.conf", "regexp": r"^#?\s*SystemMaxUse=", "line": "SystemMaxUse=1G"}
    w.case("line", "fresh", d, description="cap the journal (base.yml)", args=line_args,
           probe_output={"file": file_probe(journald)}, anchor_key=key)
    w.case("line", "converged", d, description="journal already capped", args=line_args, anchor_key=key,
           probe_output={"file": file_probe("[Journal]\n#Storage=auto\nSystemMaxUse=1G\n")})
    unit = "apt-daily-upgrade.timer" if d.apt else "dnf-automatic.timer"
    sargs = {"name": unit, "enabled": False, "state": "stopped"}
    w.case("service", "fresh", d, description=f"base.yml: no unattended upgrades ({unit} enabled and active)",
           args=sargs, probe_output={"unit": "LoadState=loaded\nActiveState=active\nUnitFileState=enabled\n"},
           anchor_key="dgx_unattended")
    w.case("service", "converged", d, description=f"{unit} disabled and stopped", args=sargs,
           probe_output={"unit": "LoadState=loaded\nActiveState=inactive\nUnitFileState=disabled\n"},
           anchor_key="dgx_unattended")
    w.case("service", "not-installed", d, description=f"{unit} does not exist (no dnf-automatic / "
           "unattended-upgrades installed): already disabled and stopped, nothing planned", args=sargs,
           probe_output={"unit": "LoadState=not-found\nActiveState=inactive\nUnitFileState=\n"},
           anchor_key="dgx_unattended")


def main() -> int:
    w = Writer()
    for path in CASES_DIR.glob("*/*.json"):
        if not json.loads(path.read_text()).get("written_by_hand"):
            path.unlink()
    for d in DISTROS:
        wait_cases(w, d)
        kernel_cases(w, d)
        driver_cases(w, d)
        reboot_cases(w, d)
        docker_cases(w, d)
        toolkit_cases(w, d)
        runtime_cases(w, d)
        base_cases(w, d)
    print(f"wrote {w.count} cases under {CASES_DIR}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
