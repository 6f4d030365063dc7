"""Package-manager adapters: how to ask what is installed and how to install, per distro family."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

from gpunode.connection import join

APT_ENV = "export DEBIAN_FRONTEND=noninteractive NEEDRESTART_MODE=a;"
APT_OPTS = ["-y", "-q", "-o", "DPkg::Lock::Timeout=600", "-o", "Dpkg::Options::=--force-confdef",
            "-o", "Dpkg::Options::=--force-confold"]


@dataclass(frozen=True)
class Wanted:
    """A package spec from a playbook: `name` or `name=version` (version may be a glob: 535.*)."""

    name: str
    version: str | None = None

    @classmethod
    def parse(cls, spec: str) -> Wanted:
        name, _, version = spec.partition("=")
        return cls(name.strip(), version.strip() or None)

    def satisfied_by(self, installed: str | None) -> bool:
        if installed is None:
            return False
        return self.version is None or fnmatch.fnmatch(installed, self.version) or installed == self.version


@dataclass
class PackageState:
    installed: dict[str, str]         # name -> version, only packages that are fully installed
    cache_age_seconds: float | None    # None when the package lists are missing


class PackageManager:
    """Interface; see AptManager and DnfManager."""

    name = ""

    def probe(self, names: list[str]) -> str:
        raise NotImplementedError

    def parse(self, output: str) -> PackageState:
        raise NotImplementedError

    def install(self, wanted: list[Wanted], refresh: bool, recommends: bool) -> str:
        raise NotImplementedError

    def remove(self, names: list[str]) -> str:
        raise NotImplementedError

    def repair(self) -> str:
        """Finish an interrupted transaction (dpkg --configure -a, yum-complete-transaction)."""
        raise NotImplementedError


class AptManager(PackageManager):
    name = "apt"

    def probe(self, names: list[str]) -> str:
        return (
            f"dpkg-query -W -f='${{Package}}\\t${{db:Status-Abbrev}}\\t${{Version}}\\n' -- {join(names)} 2>/dev/null;"
            " echo @@lists; ls /var/lib/apt/lists/ 2>/dev/null | grep -c '_Packages' ;"
            " stat -c %Y /var/lib/apt/lists 2>/dev/null; date +%s"
        )

    def parse(self, output: str) -> PackageState:
        head, _, tail = output.partition("@@lists")
        installed = {}
        for line in head.splitlines():
            parts = line.split("\t")
            if len(parts) == 3 and parts[1][1:2] == "i":  # installed (ii, and hi when held)
                installed[parts[0].split(":")[0]] = parts[2]
        numbers = [int(x) for x in tail.split() if x.isdigit()]
        age = None
        if len(numbers) == 3 and numbers[0] > 0:
            age = max(0.0, numbers[2] - numbers[1])
        return PackageState(installed, age)

    def install(self, wanted: list[Wanted], refresh: bool, recommends: bool) -> str:
        specs = [f"{w.name}={w.version}" if w.version else w.name for w in wanted]
        update = f"apt-get {join(APT_OPTS[:4])} update && " if refresh else ""
        extra = [] if recommends else ["--no-install-recommends"]
        return f"{APT_ENV} {update}apt-get {join(APT_OPTS + extra)} install -- {join(specs)}"

    def remove(self, names: list[str]) -> str:
        return f"{APT_ENV} apt-get {join(APT_OPTS)} remove -- {join(names)}"

    def repair(self) -> str:
        # dpkg finishes what it unpacked; apt fixes broken dependencies; what is still half-installed (its
        # unpack was cut off) is reinstalled; the audit must then be empty.
        half = ("dpkg-query -W -f='${db:Status-Abbrev} ${Package}\\n' | "
                "awk 'substr($0,2,1) ~ /[HU]/ || substr($0,3,1) == \"R\" {print $2}'")
        return (f"{APT_ENV} dpkg --force-confdef --force-confold --configure -a; "
                f"apt-get {join(APT_OPTS)} -f install && left=$({half}) && "
                f"{{ [ -z \"$left\" ] || apt-get {join(APT_OPTS)} install --reinstall -- $left; }} && "
                "dpkg --configure -a && audit=$(dpkg --audit) && [ -z \"$audit\" ] || "
                "{ echo \"dpkg --audit after the repair: $audit\" >&2; exit 1; }")


class DnfManager(PackageManager):
    """dnf (EL 8/9, Amazon Linux 2023) or yum (Amazon Linux 2)."""

    def __init__(self, binary: str = "dnf") -> None:
        self.name = binary

    def probe(self, names: list[str]) -> str:
        return f"rpm -q --qf '%{{NAME}}\\t%{{VERSION}}-%{{RELEASE}}\\n' -- {join(names)} 2>/dev/null; true"

    def parse(self, output: str) -> PackageState:
        installed = {}
        for line in output.splitlines():
            parts = line.split("\t")
            if len(parts) == 2:
                installed[parts[0]] = parts[1]
        return PackageState(installed, cache_age_seconds=0.0)  # dnf refreshes its metadata itself

    def install(self, wanted: list[Wanted], refresh: bool, recommends: bool) -> str:
        specs = [f"{w.name}-{w.version}" if w.version else w.name for w in wanted]
        weak = [] if recommends else ["--setopt=install_weak_deps=False"]
        weak += ["--refresh"] if refresh and self.name == "dnf" else []  # new repositories: fresh metadata
        return f"{self.name} -y {join(weak)} install -- {join(specs)}".replace("  ", " ")

    def remove(self, names: list[str]) -> str:
        return f"{self.name} -y remove -- {join(names)}"

    def repair(self) -> str:
        if self.name == "yum":
            return "yum-complete-transaction -y --cleanup-only && yum -y check"
        return "dnf -y remove --duplicates; dnf -y check"


def manager_for(package_manager: str | None) -> PackageManager:
    """The adapter for a host's package manager (from facts)."""
    if package_manager == "apt":
        return AptManager()
    if package_manager in ("dnf", "yum"):
        return DnfManager(package_manager)
    raise ValueError(f"unsupported package manager: {package_manager or 'none found'}")
