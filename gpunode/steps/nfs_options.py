"""NFS mount options: vendor presets (with their sources), user overrides key by key, live comparison."""

from __future__ import annotations

import re

VENDORS = ("generic", "alibaba-nas", "tencent-cfs", "aws-efs")
VERSIONS = ("3", "4.0", "4.1", "4.2")

# Alibaba Cloud NAS, "Mount an NFS file system on a Linux ECS instance":
#   https://www.alibabacloud.com/help/en/nas/user-guide/mount-an-nfs-file-system-on-a-linux-ecs-instance
#   (NFSv3 recommended for performance, NFSv4.0 when several instances edit the same files; the v4 option
#   string also appears in the NAS mount FAQ: https://www.alibabacloud.com/help/doc-detail/184789.htm)
ALIBABA_V3 = "vers=3,nolock,proto=tcp,rsize=1048576,wsize=1048576,hard,timeo=600,retrans=2,_netdev,noresvport"
ALIBABA_V4 = "vers=4,minorversion=0,rsize=1048576,wsize=1048576,hard,timeo=600,retrans=2,_netdev,noresvport"
# Tencent Cloud CFS, "NFS client mount parameters" (vers=3 or 4.0, hard, noresvport, lock/nolock):
#   https://cloud.tencent.com/document/product/582/113840
#   NFS v3.0 and v4.0 only (FAQ: https://intl.cloud.tencent.com/document/product/582/9551). Over v3 CFS
#   exports /<fsid> (the file system ID), over v4 it exports /. The v3 string is the v4 one with
#   vers=3,nolock,proto=tcp as that parameter page describes them.
TENCENT_V4 = "vers=4,minorversion=0,hard,timeo=600,retrans=2,_netdev,noresvport"
TENCENT_V3 = "vers=3,nolock,proto=tcp,hard,timeo=600,retrans=2,_netdev,noresvport"
# AWS EFS, "Recommended NFS mount settings":
#   https://docs.aws.amazon.com/efs/latest/ug/mounting-fs-nfs-mount-settings.html
#   and "Using the Network File System to mount EFS file systems" (NFS 4.0 and 4.1 only, 4.1 recommended):
#   https://docs.aws.amazon.com/efs/latest/ug/mounting-fs-old.html
AWS_EFS = "nfsvers={v},rsize=1048576,wsize=1048576,hard,timeo=600,retrans=2,noresvport,_netdev"
# Anything else: the kernel's defaults made explicit, hard mounts, and no boot wait on the network.
GENERIC_V3 = "vers=3,proto=tcp,hard,timeo=600,retrans=2,_netdev"
GENERIC_V4 = "vers={v},hard,timeo=600,retrans=2,_netdev"

DEFAULT_VERSION = {"generic": "4.1", "alibaba-nas": "3", "tencent-cfs": "4.0", "aws-efs": "4.1"}
SUPPORTED = {
    "generic": VERSIONS,
    "alibaba-nas": ("3", "4.0"),
    "tencent-cfs": ("3", "4.0"),
    "aws-efs": ("4.0", "4.1"),
}

# Options that mount(8)/systemd read and the kernel never sees: not compared live, not for Kubernetes.
USERSPACE = {"_netdev", "nofail", "auto", "noauto", "user", "nouser", "users", "owner", "group", "defaults"}
# Flags that exclude each other beyond the plain X / noX pairs.
FAMILIES = [{"hard", "soft", "softerr"}, {"rw", "ro"}, {"proto", "tcp", "udp", "rdma"},
            {"vers", "nfsvers", "minorversion"}]
_OPTION = re.compile(r"^[A-Za-z0-9_.\-]+(=[^,\s#]*)?\Z")

Options = list[tuple[str, str | None]]


# A data share never holds the boot (unless boot_required): systemd.mount(5): with `nofail` the mount is only wanted,
# not required, by remote-fs.target and not ordered before it, so "the boot will continue without waiting for the
# mount unit and regardless whether the mount point can be mounted successfully"; `x-systemd.mount-timeout` bounds
# the mount attempt itself (a hard NFS mount of an absent server retries for minutes). The vendors' fstab lines
# (AWS EFS nfs-automount-efs, Alibaba NAS, Tencent CFS) carry `_netdev` only; without `nofail` a NAS that is down at
# boot gives "Dependency failed for remote-fs.target" and a degraded node (issue 27).
BOOT_OPTIONS: Options = [("nofail", None), ("x-systemd.mount-timeout", "30")]


def boot_options(options: Options, required: bool) -> Options:
    """The options with `nofail` and a mount timeout added (unless the user set them), or, for a mount the boot
    must wait for, checked to hold no `nofail`."""
    keys = dict(options)
    if required:
        if "nofail" in keys:
            raise ValueError("nfs_mount: boot_required: true and the option nofail contradict each other; "
                             "drop one of them")
        return options
    return [*options, *((k, v) for k, v in BOOT_OPTIONS if k not in keys)]


def preset(vendor: str, version: str) -> Options:
    """The vendor's documented options for this NFS version; ValueError when the vendor does not offer it."""
    if vendor not in SUPPORTED:
        raise ValueError(f"vendor must be one of {', '.join(VENDORS)}, got {vendor!r}")
    if version not in SUPPORTED[vendor]:
        raise ValueError(f"{vendor} supports NFS {' and '.join(SUPPORTED[vendor])}, not {version}")
    if vendor == "alibaba-nas":
        return parse_options(ALIBABA_V3 if version == "3" else ALIBABA_V4)
    if vendor == "tencent-cfs":
        return parse_options(TENCENT_V3 if version == "3" else TENCENT_V4)
    if vendor == "aws-efs":
        return parse_options(AWS_EFS.format(v=version))
    return parse_options(GENERIC_V3 if version == "3" else GENERIC_V4.format(v=version))


def parse_options(text: str) -> Options:
    """`a=1,b,c=2` -> [("a", "1"), ("b", None), ("c", "2")]; ValueError for anything fstab cannot hold."""
    result: Options = []
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        if not _OPTION.match(item):
            raise ValueError(f"mount option {item!r} is not valid (no spaces, '#' or empty names)")
        key, sep, value = item.partition("=")
        result.append((key, value if sep else None))
    return result


def render(options: Options) -> str:
    return ",".join(k if v is None else f"{k}={v}" for k, v in options)


def family(key: str) -> set[str]:
    """The option names that `key` replaces (hard replaces soft, lock replaces nolock, vers replaces nfsvers)."""
    for group in FAMILIES:
        if key in group:
            if key == "minorversion":
                return {"minorversion"}
            return set(group)
    base = key[2:] if key.startswith("no") and len(key) > 2 else key
    return {base, "no" + base}


def merge(base: Options, overrides: Options) -> Options:
    """Overrides replace the base options of their family in place; new ones are appended."""
    result = list(base)
    for key, value in overrides:
        replaced = family(key)
        spots = [i for i, (k, _) in enumerate(result) if k in replaced]
        if spots:
            result[spots[0]] = (key, value)
            result = [item for i, item in enumerate(result) if i not in spots[1:]]
        else:
            result.append((key, value))
    return result


def version_of(options: Options) -> str:
    """The NFS version the options ask for: "3", "4", "4.0", "4.1"... ("" when unset)."""
    values = dict(options)
    vers = values.get("vers") or values.get("nfsvers") or ""
    if vers == "4" and values.get("minorversion") is not None:
        return f"4.{values['minorversion']}"
    return vers


def kernel_options(options: Options) -> Options:
    """Options without the userspace ones (for a Kubernetes PV or a live comparison)."""
    return [(k, v) for k, v in options if k not in USERSPACE and not k.startswith("x-") and k != "comment"]


def live_differences(wanted: Options, live: str) -> list[str]:
    """What differs between the options asked for and a live mount's (from /proc/mounts), in words.

    Compared: version, proto, hard/soft, timeo, retrans, sec, ro/rw, and the nolock/noresvport/noac/nocto
    flags. Not compared: rsize/wsize (the server may lower them) and options the kernel does not show.
    """
    have = dict(parse_options(live))
    want = dict(wanted)
    diffs = []
    version, live_version = version_of(wanted), have.get("vers", "")
    if version and not (live_version == version or (version == "4" and live_version.startswith("4."))):
        diffs.append(f"NFS version {live_version or '?'} (wanted {version})")
    if "proto" in want and have.get("proto", "").rstrip("6") != want["proto"]:
        diffs.append(f"proto={have.get('proto', '?')} (wanted {want['proto']})")
    for key in ("timeo", "retrans", "sec"):
        if key in want and have.get(key) != want[key]:
            diffs.append(f"{key}={have.get(key, '?')} (wanted {want[key]})")
    for group in ({"hard", "soft", "softerr"}, {"rw", "ro"}):
        asked = [k for k in want if k in group]
        if asked and asked[-1] not in have:
            shown = next((k for k in group if k in have), "?")
            diffs.append(f"{shown} (wanted {asked[-1]})")
    for flag in ("nolock", "noresvport", "noac", "nocto"):
        if flag == "nolock" and not version.startswith("3"):
            continue  # NFSv4 locks are part of the protocol: the kernel ignores nolock there
        base = flag[2:]
        if flag in want and flag not in have:
            diffs.append(f"{base} (wanted {flag})")
        elif base in want and flag in have:
            diffs.append(f"{flag} (wanted {base})")
    return diffs
