"""Package lists, `dkms status` and `systemctl show` output."""

from __future__ import annotations

import re

from gpunode.facts.model import DkmsEntry


def version_key(version: str) -> tuple[tuple[int, int | str], ...]:
    """Natural sort key: "5.15.0-1051-aws" sorts after "5.15.0-105-aws". The one version order of gpunode."""
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"(\d+)", version) if p)


def version_at_least(version: str, minimum: str) -> bool:
    """True when `version` (an upstream version such as 570.148.08) is `minimum` or newer."""
    return version_key(version) >= version_key(minimum)


def parse_package_lines(text: str | None, tool: str) -> dict[str, str]:
    """name -> version of installed packages from the dpkg-query/rpm TSV lines.

    dpkg lines carry db:Status-Abbrev; only those whose current state is `i`
    (installed) are kept. Several installed versions (kernels) are joined by ", ".
    """
    versions: dict[str, set[str]] = {}
    for line in (text or "").splitlines():
        parts = line.split("\t")
        if len(parts) < 2 or not parts[0] or not parts[1]:
            continue
        if tool == "dpkg" and (len(parts) < 3 or parts[2][1:2] != "i"):
            continue
        versions.setdefault(parts[0], set()).add(parts[1])
    return {name: ", ".join(sorted(v, key=version_key)) if len(v) > 1 else next(iter(v))
            for name, v in sorted(versions.items())}


def upstream_version(version: str) -> str:
    """Strip a Debian epoch and the packaging revision: "5:26.1.3-1~ubuntu.22.04" -> "26.1.3"."""
    version = re.sub(r"^\d+:", "", version.split(", ")[-1])
    return version.split("-", 1)[0]


def parse_dkms(text: str | None) -> tuple[DkmsEntry, ...]:
    """Entries of `dkms status`, 2.x form ("nvidia, 535, k, arch: st") or 3.x ("nvidia/535, k, ...")."""
    entries = []
    for line in (text or "").splitlines():
        head, sep, status = line.partition(": ")
        if not sep:
            continue
        parts = [p.strip() for p in head.split(",")]
        if "/" in parts[0]:
            module, _, version = parts[0].partition("/")
            rest = parts[1:]
        elif len(parts) >= 2:
            module, version, rest = parts[0], parts[1], parts[2:]
        else:
            continue
        if not module or not version or " " in module:
            continue
        entries.append(
            DkmsEntry(
                module=module,
                version=version,
                kernel=rest[0] if rest else None,
                arch=rest[1] if len(rest) > 1 else None,
                status=status.strip(),
                line=line.strip(),
            )
        )
    return tuple(entries)


def dkms_installed(entries: tuple[DkmsEntry, ...], modules: tuple[str, ...], kernel: str) -> bool:
    """True when one of `modules` is DKMS-installed for `kernel` (dkms 2.x "installed" and 3.x forms)."""
    return any(e.module in modules and e.kernel == kernel and e.status.startswith("installed") for e in entries)


def parse_systemctl_show(text: str | None) -> dict[str, dict[str, str]]:
    """Unit Id -> properties from `systemctl show -p ... UNIT...` (blank-line separated)."""
    units: dict[str, dict[str, str]] = {}
    current: dict[str, str] = {}
    for line in [*(text or "").splitlines(), ""]:
        if not line.strip():
            if current.get("Id"):
                units[current["Id"]] = current
            current = {}
            continue
        key, sep, value = line.partition("=")
        if sep:
            current[key] = value
    return units
