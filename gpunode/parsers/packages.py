"""Installed packages as dpkg-query and rpm print them, and the age of apt's package lists."""

from __future__ import annotations

from dataclasses import dataclass

from gpunode.distros.versions import version_key


def parse_dpkg_status(text: str | None) -> dict[str, str]:
    """name -> version from `dpkg-query -W -f='${Package}\\t${db:Status-Abbrev}\\t${Version}\\n'`: only packages whose
    current state is installed (`ii`, `hi` when held; not `rc`, removed with its configuration left); an
    architecture qualifier (`libc6:amd64`) is dropped."""
    installed = {}
    for line in (text or "").splitlines():
        parts = line.split("\t")
        if len(parts) == 3 and parts[1][1:2] == "i":
            installed[parts[0].split(":")[0]] = parts[2]
    return installed


def parse_rpm_query(text: str | None) -> dict[str, str]:
    """name -> VERSION-RELEASE from `rpm -q --qf '%{NAME}\\t%{VERSION}-%{RELEASE}\\n'` (`package X is not installed`
    lines, on stdout, are skipped)."""
    installed = {}
    for line in (text or "").splitlines():
        parts = line.split("\t")
        if len(parts) == 2:
            installed[parts[0]] = parts[1]
    return installed


def parse_rpm_provides(text: str | None) -> tuple[dict[str, str], dict[str, str]]:
    """From `rpm -q --whatprovides --qf '%{NAME}\\t%{VERSION}-%{RELEASE}\\t[%{PROVIDENAME} ]\\n' -- NAMES`: (name ->
    VERSION-RELEASE for every installed package and every name it provides, name -> the package providing it).
    `no package provides X` lines are skipped; a line without the provides column provides its own name only."""
    installed: dict[str, str] = {}
    providers: dict[str, str] = {}
    for line in (text or "").splitlines():
        parts = line.split("\t")
        if len(parts) not in (2, 3) or not parts[0] or " " in parts[0]:
            continue
        package, version = parts[0], parts[1]
        for name in [package, *(parts[2].split() if len(parts) == 3 else [])]:
            if name not in providers or name == package:
                providers[name] = package
                installed[name] = version
    return installed, providers


def parse_package_lines(text: str | None, tool: str) -> dict[str, str]:
    """name -> version of installed packages from facts.sh's query: dpkg `Package\\tVersion\\tdb:Status-Abbrev` or
    rpm `NAME\\tVERSION-RELEASE\\tARCH` lines.

    dpkg lines whose current state is not `i` (installed) are skipped. Several installed versions (kernels) are
    joined by ", ", oldest first.
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


@dataclass(frozen=True)
class AptLists:
    """apt's package lists: how many there are, their folder's mtime and the host's clock (seconds)."""

    count: int = 0
    mtime: int | None = None
    now: int | None = None

    @property
    def age_seconds(self) -> float | None:
        """How old the lists are; None when there are none (or the probe said too little)."""
        if self.count <= 0 or self.mtime is None or self.now is None:
            return None
        return max(0.0, self.now - self.mtime)


def parse_apt_lists(text: str | None) -> AptLists:
    """The `lists` probe: the count of /var/lib/apt/lists/*_Packages*, `stat -c %Y` of the folder, `date +%s`."""
    numbers = [int(x) for x in (text or "").split() if x.isdigit()]
    if len(numbers) != 3:
        return AptLists(count=numbers[0] if numbers else 0)
    return AptLists(*numbers)
