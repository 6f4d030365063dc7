"""NFS mount options: vendor presets (with their sources), user overrides key by key, live comparison."""

from __future__ import annotations

import re

from gpunode.steps.nfs.vendors import NFS_VENDORS
from gpunode.vendor_facts import value as fact_value

VENDORS = ("generic", "alibaba-nas", "tencent-cfs", "aws-efs")
VERSIONS = ("3", "4.0", "4.1", "4.2")

# The vendors' documented options, with their pages: gpunode/steps/nfs/vendors.py.
ALIBABA_V3: str = fact_value(NFS_VENDORS, "alibaba_v3")
ALIBABA_V4: str = fact_value(NFS_VENDORS, "alibaba_v4")
TENCENT_V4: str = fact_value(NFS_VENDORS, "tencent_v4")
TENCENT_V3: str = fact_value(NFS_VENDORS, "tencent_v3")
AWS_EFS: str = fact_value(NFS_VENDORS, "efs")
# Anything else: the kernel's defaults made explicit, hard mounts, and no boot wait on the network.
GENERIC_V3 = "vers=3,proto=tcp,hard,timeo=600,retrans=2,_netdev"
GENERIC_V4 = "vers={v},hard,timeo=600,retrans=2,_netdev"

DEFAULT_VERSION = {"generic": "4.1", "alibaba-nas": fact_value(NFS_VENDORS, "alibaba_default"),
                   "tencent-cfs": fact_value(NFS_VENDORS, "tencent_default"),
                   "aws-efs": fact_value(NFS_VENDORS, "efs_default")}
SUPPORTED = {
    "generic": VERSIONS,
    "alibaba-nas": fact_value(NFS_VENDORS, "alibaba_versions"),
    "tencent-cfs": fact_value(NFS_VENDORS, "tencent_versions"),
    "aws-efs": fact_value(NFS_VENDORS, "efs_versions"),
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
    version = version_of(wanted)
    return (_version_differences(version, have.get("vers", "")) + _value_differences(want, have)
            + _choice_differences(want, have) + _flag_differences(want, have, version))


def _version_differences(version: str, live_version: str) -> list[str]:
    """The NFS version, when one is asked for ("4" accepts any live 4.x)."""
    if version and not (live_version == version or (version == "4" and live_version.startswith("4."))):
        return [f"NFS version {live_version or '?'} (wanted {version})"]
    return []


def _value_differences(want: dict[str, str | None], have: dict[str, str | None]) -> list[str]:
    """proto (tcp matches a live tcp6), timeo, retrans and sec, each when asked for."""
    diffs = []
    if "proto" in want and have.get("proto", "").rstrip("6") != want["proto"]:
        diffs.append(f"proto={have.get('proto', '?')} (wanted {want['proto']})")
    for key in ("timeo", "retrans", "sec"):
        if key in want and have.get(key) != want[key]:
            diffs.append(f"{key}={have.get(key, '?')} (wanted {want[key]})")
    return diffs


def _choice_differences(want: dict[str, str | None], have: dict[str, str | None]) -> list[str]:
    """hard/soft/softerr and rw/ro: the last one asked for must be the live one."""
    diffs = []
    for group in ({"hard", "soft", "softerr"}, {"rw", "ro"}):
        asked = [k for k in want if k in group]
        if asked and asked[-1] not in have:
            shown = next((k for k in group if k in have), "?")
            diffs.append(f"{shown} (wanted {asked[-1]})")
    return diffs


def _flag_differences(want: dict[str, str | None], have: dict[str, str | None], version: str) -> list[str]:
    """The nolock (NFSv3 only), noresvport, noac and nocto flags, and their positive forms."""
    diffs = []
    for flag in ("nolock", "noresvport", "noac", "nocto"):
        if flag == "nolock" and not version.startswith("3"):
            continue  # NFSv4 locks are part of the protocol: the kernel ignores nolock there
        base = flag[2:]
        if flag in want and flag not in have:
            diffs.append(f"{base} (wanted {flag})")
        elif base in want and flag in have:
            diffs.append(f"{flag} (wanted {base})")
    return diffs
