"""parse_facts on the hand-made p4d fixture and on odd or partial output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpunode.facts import DkmsEntry, Facts, LockHolder, cloud_vendor, link_gen, parse_facts
from gpunode.facts.packages import upstream_version
from gpunode.facts.summary import summary_rows
from gpunode.parsers.dkms import parse_dkms
from gpunode.parsers.packages import parse_package_lines

AZURE_TAG = "7783-7084-3265-9085-8269-3286-77"
P4D = Path(__file__).parent / "data" / "facts" / "p4d-ubuntu2204.txt"


@pytest.fixture(scope="module")
def p4d() -> Facts:
    return parse_facts(P4D.read_text(encoding="utf-8"))


def test_p4d_fixture_is_labelled_hand_made() -> None:
    assert P4D.read_text(encoding="utf-8").startswith("# HAND-MADE FIXTURE")


def test_p4d_os_and_kernel(p4d: Facts) -> None:
    assert p4d.complete
    assert (p4d.os.id, p4d.os.family, p4d.os.package_manager) == ("ubuntu", "debian", "apt")
    assert p4d.os.codename == "jammy" and p4d.os.version_major == 22 and p4d.os.arch == "x86_64"
    assert p4d.kernel.running == "6.5.0-1022-aws"
    assert p4d.kernel.installed == ("6.5.0-1020-aws", "6.5.0-1022-aws")
    assert p4d.kernel.headers == ("6.5.0-1022-aws",)
    assert p4d.kernel.running_headers_present


def test_p4d_gpus_and_nvswitch(p4d: Facts) -> None:
    assert p4d.gpu_count == 8
    assert p4d.nvswitch_count == 6
    assert p4d.nvswitch_present
    gpu = p4d.gpus[0]
    assert gpu.slot == "0000:10:1c.0"
    assert (gpu.device_id, gpu.class_code, gpu.subsystem_id) == ("0x20b0", "0x030200", "0x10de:0x134f")
    assert gpu.driver == "nvidia" and gpu.numa_node == 0
    assert (gpu.link_gen_current, gpu.link_gen_max) == (4, 4)
    assert (gpu.link_width_current, gpu.link_width_max) == (16, 16)
    degraded = [g.slot for g in p4d.gpus if g.link_degraded]
    assert degraded == ["0000:a0:1d.0"]
    switch = next(g for g in p4d.gpus if g.is_nvswitch)
    assert switch.class_code == "0x068000" and switch.link_width_max == 2 and switch.device_id == "0x1af1"


def test_p4d_nvidia_driver(p4d: Facts) -> None:
    n = p4d.nvidia
    assert n.driver_version == "535.183.01"
    assert n.open_kernel_module is False
    assert set(n.modules_loaded) == {"nvidia", "nvidia_uvm", "nvidia_drm", "nvidia_modeset"}
    assert not n.nouveau_loaded and n.nouveau_blacklisted
    assert n.nvidia_smi == "/usr/bin/nvidia-smi"
    assert n.dkms == (DkmsEntry("nvidia", "535.183.01", "6.5.0-1022-aws", "x86_64", "installed"),)
    assert n.packages["nvidia-driver-535-server"] == "535.183.01-0ubuntu0.22.04.1"
    assert n.packages["nvidia-fabricmanager-535"] == "535.183.01-1"  # "hi" (held) counts as installed
    assert "docker-ce" not in n.packages
    assert n.fabricmanager_active is True and n.persistenced_active is True


def test_p4d_package_manager_lock(p4d: Facts) -> None:
    pkg = p4d.pkg
    assert pkg.locked
    uu = "/usr/bin/python3 /usr/bin/unattended-upgrade"
    assert pkg.lock_holders == (
        LockHolder("/var/lib/dpkg/lock-frontend", 1873, uu, "unattended-upgr"),
        LockHolder("/var/lib/dpkg/lock", 1873, uu, "unattended-upgr"),
    )
    assert {p.comm for p in pkg.busy_processes} == {"apt.systemd.dai", "unattended-upgr"}
    assert pkg.reboot_required
    assert not pkg.cloud_init_running  # result.json present, no cloud-init process
    assert pkg.managers_found == ("apt-get", "dpkg-query")
    assert "/var/lib/dpkg/lock-frontend" in pkg.lock_files


def test_p4d_containers(p4d: Facts) -> None:
    c = p4d.containers
    assert c.docker_installed and c.docker_version == "26.1.3"
    assert c.containerd_version == "1.6.33"
    assert c.toolkit_installed and c.runtime_config_present
    assert c.cdi_specs == ("/etc/cdi/nvidia.yaml",)
    daemon = json.loads(c.daemon_json_text or "")
    assert daemon["default-runtime"] == "nvidia"
    assert daemon["runtimes"]["nvidia"]["path"] == "nvidia-container-runtime"
    assert c.containerd_nvidia_lines == ()
    assert c.services["docker.service"] == ("active", "enabled")
    assert c.services["apt-daily-upgrade.service"] == ("activating", "static")
    assert "dnf-makecache.service" not in c.services  # LoadState=not-found


def test_p4d_storage(p4d: Facts) -> None:
    s = p4d.storage
    assert "fs-0123456789abcdef0.efs.us-east-1.amazonaws.com:/ /mnt/efs nfs4" in (s.fstab_text or "")
    efs = s.mount_at("/mnt/efs")
    assert efs is not None and efs.fstype == "nfs4" and efs.is_network
    assert "vers=4.1" in efs.options
    assert s.mount_at("/mnt/data sets") is not None  # \040 decoded
    root = s.mount_at("/")
    assert root is not None and root.fstype == "ext4" and not root.is_network
    assert s.free_bytes == {"/": 412316860416, "/var": 412316860416, "/tmp": 412316860416}
    assert s.size_bytes["/"] == 520144322560


def test_p4d_host_identity(p4d: Facts) -> None:
    assert p4d.cloud_vendor == "aws"
    assert p4d.dmi["product_name"] == "p4d.24xlarge"
    assert p4d.boot_id == "3f1c2b7e-9a4d-4e51-8c0a-5d2e9f6b1a70"
    assert p4d.boot_marker == "3f1c2b7e-9a4d-4e51-8c0a-5d2e9f6b1a70:5"
    assert p4d.uptime_seconds == pytest.approx(734.52)
    assert (p4d.uid, p4d.user, p4d.hostname) == (0, "root", "ip-172-31-5-17")
    assert p4d.efi and p4d.secure_boot is False
    assert p4d.container_virt is None and p4d.vm_virt == "amazon"
    assert p4d.script_ms == pytest.approx(143.0)
    assert p4d.installed_packages["nfs-common"] == "1:2.6.1-1ubuntu1.2"
    assert "docker.io" not in p4d.installed_packages  # "un": known but not installed
    assert "linux-headers-6.5.0-1020-aws" not in p4d.installed_packages  # "rc": config files only


def test_to_dict_is_json_and_omits_raw_by_default(p4d: Facts) -> None:
    data = json.loads(json.dumps(p4d.to_dict()))
    assert "raw" not in data
    assert data["gpu_count"] == 8 and data["nvswitch_count"] == 6
    assert data["os"]["id_like"] == ["debian"]
    assert data["containers"]["services"]["docker.service"] == ["active", "enabled"]
    assert data["pkg"]["lock_holders"][0]["pid"] == 1873
    assert p4d.to_dict(include_raw=True)["raw"].startswith("# HAND-MADE")


def test_summary_rows(p4d: Facts) -> None:
    rows = dict(summary_rows(p4d))
    assert rows["Cloud"] == "aws"
    assert rows["NVSwitch"] == "6 x 0x1af1 [nvidia] Gen4 x2"
    assert rows["GPUs"].startswith("7 x 0x20b0 [nvidia] Gen4 x16")
    assert "1 x 0x20b0 [nvidia] Gen3 x16 (degraded)" in rows["GPUs"]
    assert rows["Package locks"].startswith("/var/lib/dpkg/lock-frontend held by 1873 unattended-upgr")
    assert rows["NVIDIA driver"].startswith("535.183.01")
    assert "/mnt/efs (nfs4)" in rows["Network mounts"]
    assert rows["Secure Boot"] == "disabled"
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in summary_rows(p4d))


# ---------------------------------------------------------------- robustness


def test_missing_marker_raises_clear_error() -> None:
    with pytest.raises(ValueError, match="not gpunode facts output"):
        parse_facts("bash: line 1: syntax error\n")
    with pytest.raises(ValueError, match="not gpunode facts output"):
        parse_facts("")
    with pytest.raises(ValueError, match="not gpunode facts output"):
        parse_facts("@@gpunode-facts-end\n")  # a caller's own sentinel is not the marker


def test_minimal_and_truncated_output() -> None:
    facts = parse_facts("Welcome to Ubuntu!\r\n@@gpunode-facts 1\r\n@@kv host\r\nkernel=5.15.0-1\r\n")
    assert facts.kernel.running == "5.15.0-1"  # CRLF from a pty is tolerated
    assert not facts.complete  # no @@end: the output was cut short
    assert facts.os.family == "unknown" and facts.gpus == () and facts.secure_boot is None
    assert facts.script_ms is None and facts.uid is None and facts.boot_marker == ""
    assert summary_rows(facts)  # still renders


def test_garbage_lines_are_ignored() -> None:
    text = "\n".join(
        [
            "@@gpunode-facts 1",
            "@@kv host",
            "kernel=6.1.0-18-amd64",
            "no equals sign here",
            "|a raw line in a kv block",
            "bad key=value",
            "@@weird block",
            "kernel=not-this",
            "@@raw file /etc/os-release",
            "ID=debian",  # not |-prefixed: ignored
            "|ID=ubuntu",
            "|@@end",  # a raw line that looks like a header is data
            "@@kv pci 0000:01:00.1",
            "class=0x040300",  # NVIDIA HDMI audio: not a GPU
            "device=0x10fa",
            "@@kv pci 0000:01:00.0",
            "class=0x030000",
            "device=0x2204",
            "current_link_speed=Unknown",
            "numa_node=-1",
            "driver=",
            "@@end",
            "kernel=after-end",
        ]
    )
    facts = parse_facts(text)
    assert facts.kernel.running == "6.1.0-18-amd64"
    assert facts.os.id == "ubuntu"
    assert facts.complete
    assert [g.slot for g in facts.gpus] == ["0000:01:00.0"]
    gpu = facts.gpus[0]
    assert gpu.driver is None and gpu.numa_node is None and gpu.link_gen_current is None
    assert not facts.nvswitch_present


def test_rpm_host_with_yum_pidfile_lock() -> None:
    text = "\n".join(
        [
            "@@gpunode-facts 1",
            "@@kv host",
            "arch=aarch64",
            "efi=1",
            "secure_boot=",
            "@@raw file /etc/os-release",
            '|NAME="Amazon Linux"',
            '|ID="amzn"',
            '|VERSION_ID="2"',
            "@@raw file /etc/system-release",
            "|Amazon Linux release 2 (Karoo)",
            "@@kv dmi",
            "sys_vendor=Amazon EC2",
            "@@kv pkgmgr",
            "has=yum",
            "has=rpm",
            "holder=/var/run/yum.pid\t3301\tpidfile",
            "@@kv procs",
            "proc=3301\tyum\t/usr/bin/python /usr/bin/yum -y update",
            "proc=2290\tcloud-init\t/usr/bin/python3 /usr/bin/cloud-init modules --mode=final",
            "@@raw packages rpm",
            "|kernel\t5.10.215-203.850.amzn2\tx86_64",
            "|kernel\t5.10.210-201.852.amzn2\tx86_64",
            "|docker\t25.0.3-1.amzn2.0.1\tx86_64",
            "|nvidia-driver-latest-dkms\t550.54.15-1.el7\tx86_64",
            "@@raw dkms",
            "|nvidia/550.54.15, 5.10.215-203.850.amzn2.x86_64, x86_64: installed",
            "@@kv nvidia",
            "module_version=550.54.15",
            "@@end",
        ]
    )
    facts = parse_facts(text)
    assert (facts.os.family, facts.os.package_manager, facts.os.arch) == ("amazon", "yum", "aarch64")
    yum = LockHolder("/var/run/yum.pid", 3301, "/usr/bin/python /usr/bin/yum -y update", "yum")
    assert facts.pkg.lock_holders == (yum,)
    assert facts.pkg.cloud_init_running
    assert facts.secure_boot is None and facts.efi  # EFI, but the variable was unreadable
    assert facts.installed_packages["kernel"] == "5.10.210-201.852.amzn2, 5.10.215-203.850.amzn2"
    assert facts.containers.docker_installed and facts.containers.docker_version == "25.0.3"
    assert facts.nvidia.driver_version == "550.54.15"  # from /sys/module/nvidia/version
    assert facts.nvidia.dkms[0].module == "nvidia" and facts.nvidia.dkms[0].kernel.startswith("5.10.215")
    assert facts.nvidia.fabricmanager_active is None  # no systemctl output: unknown
    assert facts.cloud_vendor == "aws"


def test_open_kernel_module_and_cmdline_blacklist() -> None:
    text = (
        "@@gpunode-facts 1\n@@kv host\ncmdline=ro quiet modprobe.blacklist=floppy,nouveau\n"
        "@@raw file /proc/driver/nvidia/version\n"
        "|NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.90.07  "
        "Release Build  (dvs-builder@U16)\n"
        "@@kv nvidia\nmodule=nouveau\n@@end\n"
    )
    facts = parse_facts(text)
    assert facts.nvidia.driver_version == "550.90.07"
    assert facts.nvidia.open_kernel_module is True
    assert facts.nvidia.nouveau_loaded and facts.nvidia.nouveau_blacklisted


@pytest.mark.parametrize(
    ("speed", "gen"),
    [
        ("2.5 GT/s PCIe", 1),
        ("5.0 GT/s PCIe", 2),
        ("8.0 GT/s PCIe", 3),
        ("16.0 GT/s PCIe", 4),
        ("32.0 GT/s PCIe", 5),
        ("64.0 GT/s PCIe", 6),
        ("16 GT/s", 4),  # older kernels print no decimals
        ("Unknown", None),
        ("", None),
        ("3.3 GT/s", None),
    ],
)
def test_link_gen(speed: str, gen: int | None) -> None:
    assert link_gen(speed) == gen


def test_dkms_formats() -> None:
    text = (
        "nvidia, 535.183.01, 6.5.0-1022-aws, x86_64: installed\n"
        "nvidia/550.90.07, 6.8.0-1015-aws, x86_64: "
        "installed (WARNING! Diff between built and installed module!)\n"
        "nvidia/550.90.07: added\n"
        "Error! Could not locate dkms.conf file.\n"
    )
    entries = parse_dkms(text)
    assert [(e.module, e.version, e.kernel, e.arch) for e in entries] == [
        ("nvidia", "535.183.01", "6.5.0-1022-aws", "x86_64"),
        ("nvidia", "550.90.07", "6.8.0-1015-aws", "x86_64"),
        ("nvidia", "550.90.07", None, None),
    ]
    assert entries[1].status.startswith("installed (WARNING")
    assert entries[2].status == "added"


def test_package_lines_and_versions() -> None:
    dpkg = "a\t1.0-1\tii \nb\t2.0\trc \nc\t\tun \nd\t3.0\thi \nbroken line\n"
    assert parse_package_lines(dpkg, "dpkg") == {"a": "1.0-1", "d": "3.0"}
    assert upstream_version("5:26.1.3-1~ubuntu.22.04~jammy") == "26.1.3"
    assert upstream_version("24.0.7-0ubuntu2~22.04.1") == "24.0.7"
    assert upstream_version("20.10.25-1.amzn2.0.4") == "20.10.25"


@pytest.mark.parametrize(
    ("dmi", "vendor"),
    [
        ({"sys_vendor": "Amazon EC2", "product_name": "g5.xlarge"}, "aws"),
        ({"bios_vendor": "Amazon EC2"}, "aws"),
        ({"sys_vendor": "Xen", "product_version": "4.11.amazon"}, "aws"),  # Xen-based p3
        ({"sys_vendor": "Xen", "hypervisor_uuid": "ec2f0b5e-1234-5678-9abc-def012345678"}, "aws"),
        ({"sys_vendor": "Alibaba Cloud", "product_name": "Alibaba Cloud ECS"}, "alibaba"),
        ({"sys_vendor": "Tencent Cloud", "product_name": "CVM"}, "tencent"),
        ({"sys_vendor": "Google", "product_name": "Google Compute Engine"}, "gcp"),
        ({"sys_vendor": "Microsoft Corporation", "chassis_asset_tag": AZURE_TAG}, "azure"),
        ({"sys_vendor": "Microsoft Corporation", "product_name": "Surface Laptop"}, None),  # not Azure
        ({"sys_vendor": "QEMU", "product_name": "Standard PC (Q35 + ICH9, 2009)"}, None),
        ({}, None),
    ],
)
def test_cloud_vendor(dmi: dict[str, str], vendor: str | None) -> None:
    assert cloud_vendor(dmi) == vendor


def test_boot_marker_without_pid1_starttime() -> None:
    # /proc mounted with hidepid hides /proc/1/stat from users: the marker falls back to boot_id
    text = "@@gpunode-facts 1\n@@kv host\nboot_id=abc\npid1_starttime=\n@@end\n"
    assert parse_facts(text).boot_marker == "abc"
    text = text.replace("pid1_starttime=", "pid1_starttime=412")
    assert parse_facts(text).boot_marker == "abc:412"
