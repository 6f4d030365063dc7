"""os-release parsing and the distro family / package manager rules."""

from __future__ import annotations

import re

from gpunode.facts.model import OsInfo

_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DQ_ESCAPABLE = '"\\$`'

_DEBIAN_IDS = {"debian", "ubuntu"}
_REDHAT_IDS = {"rhel", "rocky", "almalinux", "centos", "fedora", "ol", "eurolinux", "cloudlinux", "circle",
               "alinux", "tencentos", "opencloudos", "anolis"}
_REDHAT_LIKE = {"rhel", "fedora", "centos"}
_SUSE_IDS = {"sles", "sled", "suse", "sle-micro", "opensuse", "opensuse-leap", "opensuse-tumbleweed"}


def os_release_fields(text: str) -> dict[str, str]:
    """KEY -> unquoted value for every assignment line; comments and junk are skipped."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        key = key.strip()
        if key.startswith("export "):
            key = key[len("export ") :].strip()
        if _KEY.match(key):
            fields[key] = _unquote(value.strip())
    return fields


def _unquote(value: str) -> str:
    """Shell-style unquoting of one os-release value ("..", '..', backslash escapes)."""
    out: list[str] = []
    i, n = 0, len(value)
    while i < n:
        ch = value[i]
        if ch == "'":
            end = value.find("'", i + 1)
            end = n if end < 0 else end
            out.append(value[i + 1 : end])
            i = end + 1
        elif ch == '"':
            i += 1
            while i < n and value[i] != '"':
                if value[i] == "\\" and i + 1 < n and value[i + 1] in _DQ_ESCAPABLE:
                    i += 1
                out.append(value[i])
                i += 1
            i += 1
        elif ch == "\\" and i + 1 < n:
            out.append(value[i + 1])
            i += 2
        elif ch.isspace():
            break  # unquoted whitespace ends the value (anything after is a comment or junk)
        else:
            out.append(ch)
            i += 1
    return "".join(out)


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
        if os_id in ("alinux", "tencentos", "opencloudos", "anolis"):  # their own numbering: 3 = EL 8
            return "yum" if major is not None and major <= 2 else "dnf"
        return "yum" if major is not None and major <= 7 else "dnf"
    return None


def _major(version_id: str) -> int | None:
    match = re.match(r"\d+", version_id)
    return int(match.group()) if match else None


def _codename(fields: dict[str, str]) -> str | None:
    for key in ("VERSION_CODENAME", "UBUNTU_CODENAME"):
        if fields.get(key):
            return fields[key]
    match = re.search(r"\(([^)]+)\)", fields.get("VERSION", ""))
    if match and match.group(1) != fields.get("VARIANT"):
        return match.group(1)
    return None


def parse_os_release(text: str, *, arch: str = "") -> OsInfo:
    """OsInfo from the text of /etc/os-release (missing keys give empty values)."""
    fields = os_release_fields(text)
    os_id = fields.get("ID", "").lower()
    id_like = tuple(fields.get("ID_LIKE", "").lower().split())
    version_id = fields.get("VERSION_ID", "")
    major = _major(version_id)
    family = distro_family(os_id, id_like)
    return OsInfo(
        id=os_id,
        id_like=id_like,
        version_id=version_id,
        version_major=major,
        pretty_name=fields.get("PRETTY_NAME", ""),
        family=family,
        package_manager=default_package_manager(family, os_id, major),
        codename=_codename(fields),
        arch=arch,
    )


_HOST_TOOL = {"apt-get": "apt", "dnf": "dnf", "yum": "yum", "zypper": "zypper"}


def pick_package_manager(derived: str | None, tools_found: tuple[str, ...]) -> str | None:
    """Prefer what the host has: the derived one if present, else dnf > yum > apt > zypper."""
    found = [_HOST_TOOL[t] for t in tools_found if t in _HOST_TOOL]
    if not found:
        return derived
    if derived in found:
        return derived
    for pm in ("dnf", "yum", "apt", "zypper"):
        if pm in found:
            return pm
    return derived
