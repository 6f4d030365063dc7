"""Debian mirrors for the lab, taken from this machine's own apt configuration (or a user-given mirror)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from gpunode.distros import LAB

LAB_COMPONENTS = LAB.LAB_COMPONENTS
ROLLING_SUITES = LAB.ROLLING_SUITES


@dataclass(frozen=True)
class AptMirrors:
    """Where the lab's Debian packages come from."""

    archive: str
    security: str | None

    def sources_list(self, suite: str) -> str:
        """A one-line-style sources.list with the components the lab needs (non-free for the driver).

        Released suites get their -updates and -security suites; unstable (sid) has neither."""
        components = " ".join(LAB_COMPONENTS)
        lines = [f"deb {self.archive} {suite} {components}"]
        if suite not in ROLLING_SUITES:
            lines.append(f"deb {self.archive} {suite}-updates {components}")
            if self.security:
                lines.append(f"deb {self.security} {suite}-security {components}")
        return "\n".join(lines) + "\n"


def _entries(apt_dir: Path) -> list[tuple[str, str]]:
    """(uri, suite) pairs from sources.list, *.list and deb822 *.sources files."""
    pairs: list[tuple[str, str]] = []
    files = [apt_dir / "sources.list", *sorted((apt_dir / "sources.list.d").glob("*.list"))]
    for path in files:
        if not path.is_file():
            continue
        for line in path.read_text(errors="replace").splitlines():
            words = re.sub(r"\[[^]]*\]", " ", line.split("#", 1)[0]).split()
            if len(words) >= 3 and words[0] == "deb":
                pairs.append((words[1], words[2]))
    for path in sorted((apt_dir / "sources.list.d").glob("*.sources")):
        for stanza in re.split(r"\n\s*\n", path.read_text(errors="replace")):
            fields: dict[str, str] = {}
            for line in stanza.splitlines():
                if ":" in line and not line.lstrip().startswith("#"):
                    key, value = line.split(":", 1)
                    fields[key.strip().lower()] = value.strip()
            if "deb" in fields.get("types", "").split() and fields.get("enabled", "yes") != "no":
                for uri in fields.get("uris", "").split():
                    pairs.extend((uri, suite) for suite in fields.get("suites", "").split())
    return pairs


def host_mirrors(apt_dir: Path = Path("/etc/apt"), override: str | None = None) -> AptMirrors:
    """The Debian archive and security mirrors this machine's apt uses; `override` wins for the archive."""
    archive = security = None
    for uri, suite in _entries(apt_dir):
        if suite.endswith("-security") or "security" in uri:
            security = security or uri
        elif not suite.startswith("cloud-sdk") and LAB.ARCHIVE_URL_MARK in uri:
            archive = archive or uri
    archive = override or archive
    if not archive:
        raise RuntimeError(
            "no Debian mirror found in /etc/apt sources; give one with --mirror URL (a Debian archive mirror)"
        )
    return AptMirrors(archive=archive.rstrip("/"), security=security.rstrip("/") if security else None)


# Lab hosts send no pipelined HTTP requests: through this machine's HTTP proxy a pipelined `apt-get update` on a lab
# host waited forever for the third of three InRelease answers (measured 2026-11-25: 2 of 3 received, the connection
# idle for 11 minutes, the CI suite stalled on it). apt's documented remedy for proxies that do not follow HTTP/1.1
# pipelining (Debian/apt doc/apt-transport-http.1.xml:93-98 at 6b128124).
NO_PIPELINING = 'Acquire::http::Pipeline-Depth "0";'


# `apt-get update` on a lab host, its stalls ended and retried: even without pipelining an update once stalled with
# every apt process waiting in poll and the proxy's connection idle for 8 minutes (2026-11-28, two labs updating at
# once; apt's Acquire::http::Timeout never fired). For tests and benches that refresh a lab host's lists.
RETRIED_UPDATE = ("(for try in 1 2 3; do timeout 150 apt-get -o DPkg::Lock::Timeout=300 -o Acquire::Languages=none "
                  "update -qq && exit 0; done; exit 1)")


def lab_apt_options() -> list[str]:
    """The apt options a lab host's rootfs gets: this machine's Acquire::Check-* options and no pipelining."""
    return [*host_apt_options(), NO_PIPELINING]


def host_apt_options(apt_dir: Path = Path("/etc/apt")) -> list[str]:
    """This machine's Acquire::Check-* options (needed when its mirror is a dated snapshot)."""
    conf_dir = apt_dir / "apt.conf.d"
    options: list[str] = []
    for path in sorted(conf_dir.glob("*")) if conf_dir.is_dir() else []:
        for line in path.read_text(errors="replace").splitlines():
            if re.match(r"\s*Acquire::Check-(Valid-Until|Date)\b", line):
                options.append(line.strip())
    return options
