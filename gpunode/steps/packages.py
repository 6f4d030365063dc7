"""`packages`: one install command for everything missing; the apt cache refreshed only when stale."""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, replace
from typing import Literal

from gpunode.connection import ExecResult
from gpunode.facts import Facts
from gpunode.steps.base import Action, Step, StepContext, arg, register
from gpunode.steps.pkgmgr import AptManager, PackageManager, PackageState, Wanted, manager_for
from gpunode.steps.probe import Snippets

# A package name (Debian/RPM characters), optionally =version where the version may hold glob characters.
PACKAGE_SPEC = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+:~-]*(=[A-Za-z0-9._+:~*?\[\]-]+)?")


@register
@dataclass
class PackagesStep(Step):
    """Ensure packages are installed (or absent). `names` may pin versions: `name=1.2.*`. On RPM a name is
    satisfied by whatever provides it (`rpm -q --whatprovides`: curl-minimal provides curl); naming the full build
    where its `-minimal` twin is installed (`curl-full`, `gnupg2-full`) swaps it in one transaction (`dnf swap`)."""

    kind = "packages"
    facts_sections = frozenset()  # facts.pkg (an interrupted transaction) is read only when something must change
    names: list[str] = arg(factory=list, doc="packages; `name=version` pins, globs allowed")
    state: Literal["present", "absent"] = arg("present", "absent: remove them")
    cache_valid_time: int = arg(3600, "seconds: apt lists older than this are refreshed before an install")
    install_recommends: bool = arg(False, "install recommended packages too")
    # Ansible's apt `allow_downgrade` (ansible-core 2.12, apt-get --allow-downgrades:
    # https://docs.ansible.com/ansible/latest/modules/apt_module.html); off, apt refuses a pinned older version
    allow_downgrade: bool = arg(False, "a pinned version older than the installed one replaces it (apt "
                                       "--allow-downgrades); off: apt refuses it")
    timeout: int = arg(3600, "seconds")

    def __post_init__(self) -> None:
        for name in self.names:
            if not PACKAGE_SPEC.fullmatch(name):
                raise ValueError(f"packages.names: {name!r} is not a package name (or name=version)")

    def probe(self, facts: Facts) -> Snippets | None:
        if not self.names:
            return None
        return manager_for(facts.os.package_manager).probe([Wanted.parse(n).name for n in self.names])

    def plan(self, ctx: StepContext) -> list[Action]:
        if not self.names:
            return []
        manager = manager_for(ctx.facts.os.package_manager)
        changes = self._plan(ctx, manager)
        return repair_first(ctx, manager, self.timeout) + changes if changes else []

    def _plan(self, ctx: StepContext, manager: PackageManager) -> list[Action]:
        state = manager.parse(ctx.probe)
        wanted = [Wanted.parse(n) for n in self.names]
        if self.state == "absent":
            return self._remove(manager, [w.name for w in wanted if w.name in state.installed])
        missing = [w for w in wanted if not w.satisfied_by(state.installed.get(w.name))]
        if not missing:
            return []
        swaps = manager.swaps(missing, state)
        if swaps:
            return self._swap(ctx, manager, swaps, [w for w in missing if w.name not in {f for _, f in swaps}])
        return self._install(ctx, manager, state, missing)

    def _install(self, ctx: StepContext, manager: PackageManager, state: PackageState,
                 missing: list[Wanted]) -> list[Action]:
        sources_changed = ctx.state.package_sources_changed  # a repository added earlier in this run
        stale = sources_changed or state.cache_age_seconds is None or state.cache_age_seconds > self.cache_valid_time
        reasons = [
            f"{w.name} is {state.installed[w.name]}, wanted {w.version}" if w.name in state.installed
            else f"{w.name} is not installed"
            for w in missing
        ]
        ctx.will_install(w.name for w in missing)
        refresh_note = " (after refreshing the package lists)" if stale and manager.name == "apt" else ""
        if sources_changed:
            reasons.append("package sources changed in this run: lists refreshed first")
        return [Action(
            f"install packages: {', '.join(w.name for w in missing)}{refresh_note}",
            "; ".join(reasons),
            manager.install(missing, refresh=stale, recommends=self.install_recommends,
                            downgrades=self.allow_downgrade),
            timeout=self.timeout,
            fix="check the package names for this distro, the repositories (apt-get update / dnf repolist) and "
            "network access to the mirror",
            installs=tuple(AptManager.specs(missing)), recommends=self.install_recommends,
        )]

    def _remove(self, manager: PackageManager, present: list[str]) -> list[Action]:
        if not present:
            return []
        return [Action(f"remove packages: {', '.join(present)}", "installed", manager.remove(present),
                       timeout=self.timeout)]

    def _swap(self, ctx: StepContext, manager: PackageManager, pairs: list[tuple[str, str]],
              rest: list[Wanted]) -> list[Action]:
        """A full build asked for where its `-minimal` twin is installed: each swapped in one transaction (dnf swap,
        nothing else erased), then the rest installed as usual."""
        ctx.will_install(full for _, full in pairs)
        reasons = [f"{full} is not installed; {minimal} is in its place and conflicts with it (swapped in one "
                   "transaction)" for minimal, full in pairs]
        reasons += [f"{w.name} is not installed" for w in rest]
        command = manager.swap(pairs)
        if rest:
            command += " && " + manager.install(rest, refresh=ctx.state.package_sources_changed,
                                                recommends=self.install_recommends)
        names = [f"{minimal} -> {full}" for minimal, full in pairs] + [w.name for w in rest]
        return [Action(f"install packages: {', '.join(names)}", "; ".join(reasons), command, timeout=self.timeout,
                       fix="check the package names for this distro and the repositories (dnf repolist)",
                       installs=tuple(AptManager.specs(rest)) + tuple(f for _, f in pairs),
                       recommends=self.install_recommends)]

    def after_action(self, ctx: StepContext, action: Action, result: ExecResult) -> None:
        command = action.command or ""
        if " update && " in command or "--refresh" in command:
            ctx.state.package_sources_changed = False  # the lists now know the new sources


def repair_first(ctx: StepContext, manager: PackageManager, timeout: int,
                 removed: Collection[str] = ()) -> list[Action]:
    """An interrupted transaction (a cut-off first-boot upgrade, a killed install) finished before the package
    manager runs, once per run (the first step that meets it plans it). Packages left half-way that an earlier
    action removes (`removed`) need no repair."""
    pkg = ctx.facts.pkg
    left = tuple(e for e in pkg.dpkg_unfinished if e.partition(":")[0] not in removed)
    why = replace(pkg, dpkg_unfinished=left).interrupted
    if not why or ctx.state.package_manager_repaired:
        return []
    ctx.state.package_manager_repaired = True
    return [Action("repair the interrupted package manager first" + (
        " (dpkg --configure -a, apt-get -f install)" if manager.name == "apt" else ""), why, manager.repair(),
        timeout=timeout, fix="run the repair by hand on the host and read its errors (dpkg --audit)")]
