"""Package-manager adapters: how to ask what is installed and how to install, with apt or dnf/yum (what a distro
adds, such as the repositories DKMS needs, is its adapter's: gpunode/distros/)."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field

from gpunode.connection import join, q
from gpunode.distros.rpm_twins import TWINS, probe_names, twin_of
from gpunode.parsers.holds import parse_apt_showhold, parse_versionlock_list
from gpunode.parsers.packages import parse_apt_lists, parse_dpkg_status, parse_rpm_provides
from gpunode.steps.probe import ProbeOutput, Snippets

APT_ENV = "export DEBIAN_FRONTEND=noninteractive NEEDRESTART_MODE=a;"
APT_OPTS = ["-y", "-q", "-o", "DPkg::Lock::Timeout=600", "-o", "Dpkg::Options::=--force-confdef",
            "-o", "Dpkg::Options::=--force-confold"]
# Set for a command that refreshes the apt lists itself (Action.refreshes: scripts/kernel_headers.sh) when this run
# has refreshed them already: the command skips its own `apt-get update`.
LISTS_FRESH_ENV = "export GPUNODE_APT_LISTS_FRESH=1;"


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
    # RPM: a name asked for -> the installed package providing it (curl -> curl-minimal); absent where none does
    providers: dict[str, str] = field(default_factory=dict)


class PackageManager:
    """Interface; see AptManager and DnfManager."""

    name = ""

    def probe(self, names: list[str]) -> Snippets:
        """Snippets asking what is installed of `names` (and how old the lists are); a step places them under a
        section name of its own with `probe.nested` and hands `ctx.probe.within(name)` to `parse`."""
        raise NotImplementedError

    def parse(self, output: ProbeOutput) -> PackageState:
        raise NotImplementedError

    def install(self, wanted: list[Wanted], refresh: bool, recommends: bool, downgrades: bool = False) -> str:
        """Install `wanted`; `downgrades`: a pinned version older than the installed one is allowed (dnf installs an
        older version it is given by name and version without being asked)."""
        raise NotImplementedError

    def swaps(self, wanted: list[Wanted], state: PackageState) -> list[tuple[str, str]]:
        """(minimal, full) pairs to replace in place for `wanted` (missing packages): none but on RPM."""
        return []

    def swap(self, pairs: list[tuple[str, str]]) -> str:
        """Replace each minimal build by its full build, each in one transaction."""
        raise NotImplementedError

    def remove(self, names: list[str]) -> str:
        raise NotImplementedError

    def held_probe(self) -> str:
        """Shell that lists the held (version-locked) packages; `parse_held` reads its output."""
        raise NotImplementedError

    def parse_held(self, output: str) -> set[str]:
        """Names of held packages."""
        raise NotImplementedError

    def hold(self, names: list[str]) -> str:
        """Keep these packages at their installed version."""
        raise NotImplementedError

    def unhold(self, names: list[str]) -> str:
        """Let these packages upgrade again."""
        raise NotImplementedError

    def version_of(self, name: str) -> str:
        """Shell printing the upstream version of an installed package (535.183.01), nothing when absent."""
        raise NotImplementedError

    def install_at(self, names: list[str], version_var: str) -> str:
        """Install `names` at the upstream version held in shell variable `version_var` (set on the host)."""
        raise NotImplementedError

    def available_probe(self, prefix: str) -> str:
        """Shell listing the names of the packages the repositories offer that start with `prefix`; "" where the
        adapter cannot tell cheaply."""
        return ""

    def repair(self) -> str:
        """Finish an interrupted transaction (dpkg --configure -a, yum-complete-transaction)."""
        raise NotImplementedError


class AptManager(PackageManager):
    name = "apt"

    def probe(self, names: list[str]) -> Snippets:
        return {
            "installed": f"dpkg-query -W -f='${{Package}}\\t${{db:Status-Abbrev}}\\t${{Version}}\\n' -- {join(names)}"
                         " 2>/dev/null",
            # how many package lists there are (a glob: no ls | grep), their folder's age, the host's clock
            "lists": "set -- /var/lib/apt/lists/*_Packages*; if [ -e \"$1\" ]; then echo $#; else echo 0; fi; "
                     "stat -c %Y /var/lib/apt/lists 2>/dev/null; date +%s",
        }

    def parse(self, output: ProbeOutput) -> PackageState:
        return PackageState(parse_dpkg_status(output["installed"]), parse_apt_lists(output["lists"]).age_seconds)

    @staticmethod
    def update() -> str:
        """Refresh the package lists. No translated descriptions: a third of the download and of the parsing, unused
        by a node's provisioning."""
        return f"apt-get {join(APT_OPTS[:4])} -o Acquire::Languages=none update"

    @staticmethod
    def specs(wanted: list[Wanted]) -> list[str]:
        return [f"{w.name}={w.version}" if w.version else w.name for w in wanted]

    def install(self, wanted: list[Wanted], refresh: bool, recommends: bool, downgrades: bool = False) -> str:
        update = f"{self.update()} && " if refresh else ""
        extra = ([] if recommends else ["--no-install-recommends"]) + (["--allow-downgrades"] if downgrades else [])
        return f"{APT_ENV} {update}apt-get {join(APT_OPTS + extra)} install -- {join(self.specs(wanted))}"

    @staticmethod
    def leading_update() -> str:
        """The refresh an install command starts with (`install(..., refresh=True)`)."""
        return f"{APT_ENV} {AptManager.update()} && "

    def print_uris(self, specs: list[str], recommends: bool) -> str:
        """What `install` of `specs` would download, one `'URI' FILE SIZE HASH` line per file, changing nothing."""
        extra = [] if recommends else ["--no-install-recommends"]
        return f"apt-get {join(['-qq', '-y', '--print-uris', *extra])} install -- {join(specs)}"

    def remove(self, names: list[str]) -> str:
        return f"{APT_ENV} apt-get {join(APT_OPTS)} remove -- {join(names)}"

    def available_probe(self, prefix: str) -> str:
        """`apt-cache pkgnames PREFIX`; a host without package lists (a fresh image) is asked with lists fetched
        into a temporary directory, so check mode sees what the real run sees and nothing on the host changes."""
        return ("o=''; t=''; if ! ls /var/lib/apt/lists/*_Packages >/dev/null 2>&1; then t=$(mktemp -d) && "
                "mkdir -p \"$t/lists/partial\" \"$t/cache/archives/partial\" && "
                "o=\"-o Dir::State::Lists=$t/lists -o Dir::Cache=$t/cache\" && "
                "{ apt-get -q $o -o DPkg::Lock::Timeout=60 update >/dev/null 2>&1 || o=\"-o Dir::Cache=$t/cache\"; }; "
                f"fi; apt-cache $o pkgnames {q(prefix)} 2>/dev/null | sort; [ -z \"$t\" ] || rm -rf \"$t\"")

    def held_probe(self) -> str:
        # No pkgcache.bin written: a probe (check mode too) leaves the host as it found it.
        return "apt-mark -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache= showhold 2>/dev/null"

    def parse_held(self, output: str) -> set[str]:
        return parse_apt_showhold(output)

    def hold(self, names: list[str]) -> str:
        return f"apt-mark hold -- {join(names)}"

    def unhold(self, names: list[str]) -> str:
        return f"apt-mark unhold -- {join(names)}"

    def version_of(self, name: str) -> str:
        return f"dpkg-query -W -f='${{Version}}' -- {q(name)} 2>/dev/null | sed 's/^[0-9]*://; s/-[^-]*$//'"

    def install_at(self, names: list[str], version_var: str) -> str:
        # apt takes a version glob (pkg=535.183.01*), as NVIDIA/gpu-driver-container's install.sh pins them.
        specs = " ".join(f'{q(n)}="${version_var}*"' for n in names)
        return f"{APT_ENV} apt-get {join(APT_OPTS + ['--no-install-recommends'])} install -- {specs}"

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

    def probe(self, names: list[str]) -> Snippets:
        # By what provides each name (curl-minimal provides curl), with each package's provides listed so the answer
        # maps back to the names asked; the `-minimal` twins and their full builds are asked in the same query.
        return {"installed": "rpm -q --whatprovides --qf "
                             "'%{NAME}\\t%{VERSION}-%{RELEASE}\\t[%{PROVIDENAME} ]\\n' -- "
                             f"{join(probe_names(names))} 2>/dev/null"}

    def parse(self, output: ProbeOutput) -> PackageState:
        installed, providers = parse_rpm_provides(output["installed"])
        for twin in (fact.value for fact in TWINS.values()):  # a plain name is served by either build
            build = next((b for b in (twin.full, twin.minimal) if providers.get(b) == b), None)
            for name in twin.names:
                if build and name not in installed:
                    installed[name], providers[name] = installed[build], build
        return PackageState(installed, cache_age_seconds=0.0, providers=providers)  # dnf refreshes itself

    def swaps(self, wanted: list[Wanted], state: PackageState) -> list[tuple[str, str]]:
        pairs = []
        for w in wanted:
            twin = twin_of(w.name)
            if twin and w.name == twin.full and twin.minimal in state.installed and not w.version:
                pairs.append((twin.minimal, twin.full))
        return pairs

    def swap(self, pairs: list[tuple[str, str]]) -> str:
        # dnf swap removes and installs in one transaction, nothing else erased (AWS's AL2023 docs, the ECS AMI)
        return " && ".join(f"{self.name} -y swap {q(minimal)} {q(full)}" for minimal, full in pairs)

    def install(self, wanted: list[Wanted], refresh: bool, recommends: bool, downgrades: bool = False) -> str:
        specs = [f"{w.name}-{w.version}" if w.version else w.name for w in wanted]
        weak = [] if recommends or self.name != "dnf" else ["--setopt=install_weak_deps=False"]  # yum has none
        weak += ["--refresh"] if refresh and self.name == "dnf" else []  # new repositories: fresh metadata
        return f"{self.name} -y {join(weak)} install -- {join(specs)}".replace("  ", " ")

    def remove(self, names: list[str]) -> str:
        return f"{self.name} -y remove -- {join(names)}"

    def held_probe(self) -> str:
        return f"{self.name} -q versionlock list 2>/dev/null"

    def parse_held(self, output: str) -> set[str]:
        return parse_versionlock_list(output)

    def hold(self, names: list[str]) -> str:
        plugin = "python3-dnf-plugin-versionlock" if self.name == "dnf" else "yum-plugin-versionlock"
        return (f"{{ rpm -q {plugin} >/dev/null || {self.name} -y install {plugin}; }} && "
                f"{self.name} versionlock add -- {join(names)}")

    def unhold(self, names: list[str]) -> str:
        return f"{self.name} versionlock delete -- {join(names)}"

    def version_of(self, name: str) -> str:
        return f"rpm -q --qf '%{{VERSION}}' -- {q(name)} 2>/dev/null"

    def install_at(self, names: list[str], version_var: str) -> str:
        specs = " ".join(f'{q(n)}-"${version_var}"' for n in names)
        return f"{self.name} -y install -- {specs}"

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


def without_refresh(command: str) -> str:
    """`command` less the list refresh it starts with (the lists were refreshed earlier in this run)."""
    leading = AptManager.leading_update()
    return f"{APT_ENV} {command.removeprefix(leading)}" if command.startswith(leading) else command
