"""nfs_mount without a host: vendor presets, key-by-key overrides, argument checks, live option comparison."""

from __future__ import annotations

import pytest

from gpunode.steps import build_step
from gpunode.steps.nfs.options import kernel_options, live_differences, merge, parse_options, preset, render

# /proc/mounts lines as the Linux NFS client prints them (nfs_show_options), for the vendors' presets
ALIBABA_V3_LIVE = ("rw,relatime,vers=3,rsize=1048576,wsize=1048576,namlen=255,hard,nolock,noresvport,proto=tcp,"
                   "timeo=600,retrans=2,sec=sys,mountaddr=192.168.0.12,mountvers=3,mountport=4002,mountproto=tcp,"
                   "local_lock=all,addr=192.168.0.12")
EFS_LIVE = ("rw,relatime,vers=4.1,rsize=1048576,wsize=1048576,namlen=255,hard,noresvport,proto=tcp,timeo=600,"
            "retrans=2,sec=sys,clientaddr=172.31.5.9,local_lock=none,addr=172.31.7.20")


def line(**args) -> str:
    """gpunode's fstab line; boot_required (no nofail) unless given: the vendors' own option strings."""
    return build_step("nfs_mount", {"server": "nas.example", "export": "/", "path": "/mnt/nas",
                                    "boot_required": True, **args}).line


def test_by_default_a_share_never_holds_the_boot():
    assert line(boot_required=False).split()[3] == (
        "vers=4.1,hard,timeo=600,retrans=2,_netdev,nofail,x-systemd.mount-timeout=30")
    assert line(boot_required=False, vendor="aws-efs").split()[3].endswith(
        ",noresvport,_netdev,nofail,x-systemd.mount-timeout=30")
    assert line(boot_required=False, automount=True).split()[3].endswith(
        ",_netdev,x-systemd.automount,nofail,x-systemd.mount-timeout=30")
    # the user's own values win, key by key
    assert line(boot_required=False, options="x-systemd.mount-timeout=90").split()[3].endswith(
        ",_netdev,x-systemd.mount-timeout=90,nofail")
    with pytest.raises(ValueError, match="boot_required: true and the option nofail contradict"):
        line(options="nofail")


def test_vendor_presets_are_the_documented_option_strings():
    assert line(vendor="alibaba-nas") == (
        "nas.example:/ /mnt/nas nfs vers=3,nolock,proto=tcp,rsize=1048576,wsize=1048576,hard,timeo=600,retrans=2,"
        "_netdev,noresvport 0 0")  # NFSv3 is Alibaba's recommendation
    assert line(vendor="alibaba-nas", nfs_version="4.0").split()[3] == (
        "vers=4,minorversion=0,rsize=1048576,wsize=1048576,hard,timeo=600,retrans=2,_netdev,noresvport")
    assert line(vendor="tencent-cfs").split()[3] == "vers=4,minorversion=0,hard,timeo=600,retrans=2,_netdev,noresvport"
    assert line(vendor="tencent-cfs", nfs_version=3, export="/z3r6k95r").split()[:4] == [
        "nas.example:/z3r6k95r", "/mnt/nas", "nfs",
        "vers=3,nolock,proto=tcp,hard,timeo=600,retrans=2,_netdev,noresvport"]
    assert line(vendor="aws-efs").split()[3] == (
        "nfsvers=4.1,rsize=1048576,wsize=1048576,hard,timeo=600,retrans=2,noresvport,_netdev")
    assert line().split()[3] == "vers=4.1,hard,timeo=600,retrans=2,_netdev"
    assert line(nfs_version="3").split()[3] == "vers=3,proto=tcp,hard,timeo=600,retrans=2,_netdev"


def test_user_options_override_the_preset_key_by_key():
    efs = line(vendor="aws-efs", options="soft,timeo=150,nconnect=4,vers=4.0").split()[3]
    assert efs == "vers=4.0,rsize=1048576,wsize=1048576,soft,timeo=150,retrans=2,noresvport,_netdev,nconnect=4"
    assert line(vendor="alibaba-nas", options="lock,resvport").split()[3] == (
        "vers=3,lock,proto=tcp,rsize=1048576,wsize=1048576,hard,timeo=600,retrans=2,_netdev,resvport")
    assert render(merge(parse_options("vers=4,minorversion=0,hard"), parse_options("minorversion=1"))) == (
        "vers=4,minorversion=1,hard")
    assert line(automount=True).split()[3].endswith(",_netdev,x-systemd.automount")


def test_bad_arguments_are_refused_with_the_reason():
    with pytest.raises(ValueError, match="aws-efs supports NFS 4.0 and 4.1, not 3"):
        build_step("nfs_mount", {"server": "fs", "export": "/", "path": "/mnt/x", "vendor": "aws-efs",
                                 "nfs_version": 3})
    with pytest.raises(ValueError, match="/<fsid>"):
        build_step("nfs_mount", {"server": "fs", "export": "/", "path": "/mnt/x", "vendor": "tencent-cfs",
                                 "nfs_version": "3"})
    with pytest.raises(ValueError, match="other than /"):
        build_step("nfs_mount", {"server": "fs", "export": "/", "path": "/"})
    with pytest.raises(ValueError, match="host name or an IP"):
        build_step("nfs_mount", {"server": "fs; reboot", "export": "/", "path": "/mnt/x"})
    with pytest.raises(ValueError, match="not valid"):
        build_step("nfs_mount", {"server": "fs", "export": "/", "path": "/mnt/x", "options": "hard,x y"})
    with pytest.raises(ValueError, match="must be one of"):
        build_step("nfs_mount", {"server": "fs", "export": "/", "path": "/mnt/x", "vendor": "azure-files"})


def test_paths_are_normalized_and_escaped_for_fstab():
    step = build_step("nfs_mount", {"server": "[fd00::5]", "export": "/data/", "path": "/mnt//my data/"})
    assert step.path == "/mnt/my data" and step.export == "/data"
    assert step.line.startswith("[fd00::5]:/data /mnt/my\\040data nfs ")
    assert step.same_source("[FD00::5]:/data/")


def test_live_options_of_the_vendors_presets_match():
    alibaba = build_step("nfs_mount", {"server": "a", "export": "/", "path": "/m", "vendor": "alibaba-nas"})
    assert live_differences(alibaba.mount_options, ALIBABA_V3_LIVE) == []
    efs = build_step("nfs_mount", {"server": "a", "export": "/", "path": "/m", "vendor": "aws-efs"})
    assert live_differences(efs.mount_options, EFS_LIVE) == []
    # a server that lowers rsize is not a difference; vers=4 (no minor) accepts whatever 4.x was negotiated
    lowered = EFS_LIVE.replace("rsize=1048576", "rsize=65536")
    assert live_differences(parse_options("vers=4,rsize=1048576"), lowered) == []


def test_live_option_differences_are_named():
    alibaba = build_step("nfs_mount", {"server": "a", "export": "/", "path": "/m", "vendor": "alibaba-nas"})
    live = ALIBABA_V3_LIVE.replace("timeo=600", "timeo=300").replace("hard", "soft").replace("noresvport,", "")
    assert live_differences(alibaba.mount_options, live) == [
        "timeo=300 (wanted 600)", "soft (wanted hard)", "resvport (wanted noresvport)"]
    efs = build_step("nfs_mount", {"server": "a", "export": "/", "path": "/m", "vendor": "aws-efs"})
    assert live_differences(efs.mount_options, EFS_LIVE.replace("vers=4.1", "vers=4.0")) == [
        "NFS version 4.0 (wanted 4.1)"]


def test_kernel_options_drop_what_only_mount_and_systemd_read():
    options = parse_options("vers=3,_netdev,nofail,x-systemd.automount,x-systemd.mount-timeout=30,hard")
    assert render(kernel_options(options)) == "vers=3,hard"
    assert preset("generic", "4.2") == [("vers", "4.2"), ("hard", None), ("timeo", "600"), ("retrans", "2"),
                                        ("_netdev", None)]
