"""os-release parsing; the family and package manager rules are the distros' (gpunode/distros/identity.py)."""

from __future__ import annotations

import re

from gpunode.distros.identity import default_package_manager, distro_family
from gpunode.facts.model import OsInfo

_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DQ_ESCAPABLE = '"\\$`'


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
