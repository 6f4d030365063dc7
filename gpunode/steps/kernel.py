"""`kernel_headers`: headers for the running kernel, or a newer distro kernel + headers and a reboot."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpunode.connection import ExecResult, join, q
from gpunode.distros import UnsupportedDistro, for_os
from gpunode.facts import Facts
from gpunode.scripts import script_text
from gpunode.steps.base import Action, Step, StepContext, StepFailed, arg, register
from gpunode.steps.initramfs_left import left_initramfs_pause
from gpunode.steps.initramfs_pause import PAUSE_PROBE
from gpunode.steps.packages import repair_first
from gpunode.steps.pkgmgr import manager_for
from gpunode.steps.probe import Snippets

NO_HEADERS_EXIT = 10


@register
@dataclass
class KernelHeadersStep(Step):
    """Never build modules for the wrong kernel: headers for the running one, or (policy upgrade) a newer one."""

    kind = "kernel_headers"
    facts_sections = frozenset({"pkgmgr", "packages"})
    policy: Literal["require", "upgrade"] = arg("require", "no headers for the running kernel: require fails, "
                                                "upgrade installs the newest kernel + headers and reboots")
    hold: bool = arg(False, "hold the kernel and its headers")
    timeout: int = arg(1800, "seconds for the install")

    def probe(self, facts: Facts) -> Snippets:
        """`held`: the held packages; `headers` (apt, when plan() needs it): the candidate version of the
        running kernel's headers package on its first line ("(none)": the lists do not know it), then the newest
        headers packages that exist."""
        distro = for_os(facts.os)
        apt = distro.package_format == "deb"
        held = {"held": manager_for(facts.os.package_manager).held_probe(),
                **({"initramfs_pause": PAUSE_PROBE} if apt else {})}  # a pause left by a run cut short
        if apt and (facts.kernel.running_headers_present or
                    (self.policy == "upgrade" and facts.kernel.pending)):
            return held  # nothing to look up: plan() needs no candidate
        if apt:
            pkg = q(distro.headers_package(facts.kernel.running))
            meta = distro.newest_kernel_packages(facts.kernel.running, facts.kernel.package)[0]
            # policy upgrade: the kernel the distro's meta package would install (its candidate's dependency), for
            # check mode to plan the driver build and the reboot for it (backports may list newer ones)
            nxt = (f"apt-cache $o depends {q(meta)} 2>/dev/null | "
                   "sed -n 's/^ *Depends: linux-image-\\([0-9][^ ]*\\)$/@@next \\1/p' | head -n 1; "
                   if self.policy == "upgrade" else "")
            # A host without package lists (a fresh image) is asked with lists fetched into a temporary
            # directory, so check mode sees what the real run sees after its `apt-get update` and changes
            # nothing (no lists, no pkgcache.bin written). A package the lists do not know prints no
            # Candidate line at all: that is "(none)".
            return {**held, "headers": "o=''; t=''; if ! ls /var/lib/apt/lists/*_Packages >/dev/null 2>&1; then "
                    "t=$(mktemp -d) && mkdir -p \"$t/lists/partial\" \"$t/cache/archives/partial\" && "
                    "o=\"-o Dir::State::Lists=$t/lists -o Dir::Cache=$t/cache\" && "
                    "{ apt-get -q $o -o DPkg::Lock::Timeout=60 update >/dev/null 2>&1 || "
                    "o=\"-o Dir::Cache=$t/cache\"; }; fi; "
                    f"c=$(apt-cache $o policy {pkg} 2>/dev/null | sed -n 's/^ *Candidate: //p'); "
                    "if [ -z \"$c\" ] && "
                    "[ -n \"$(apt-cache $o pkgnames linux-headers- 2>/dev/null | head -n 1)\" ]; then c='(none)'; fi; "
                    "echo \"$c\"; " + nxt +
                    "apt-cache $o pkgnames linux-headers- 2>/dev/null | grep -E '^linux-headers-[0-9]' | "
                    "grep -v -- -common | sort -V | tail -n 12; [ -n \"$t\" ] && rm -rf \"$t\""}
        return held

    def plan(self, ctx: StepContext) -> list[Action]:
        """gpunode's initramfs pause left by a run cut short removed first (steps/initramfs_pause.py), then the
        headers (or the newest kernel) and the hold."""
        left = left_initramfs_pause(ctx.probe["initramfs_pause"], ctx.state.initramfs_held) \
            if ctx.probe.asked("initramfs_pause") else []
        return left + self._plan(ctx)

    def _plan(self, ctx: StepContext) -> list[Action]:
        facts = ctx.facts
        distro = for_os(facts.os)
        try:
            distro.check_supported()
        except UnsupportedDistro as exc:
            raise StepFailed(str(exc), fix="provision a supported distribution (docs/gpu-node.md lists them)") \
                from None
        running = facts.kernel.running
        held = ctx.probe["held"]
        if facts.kernel.running_headers_present:
            ctx.state.target_kernel = running
            return self._hold_actions(facts, running, held)
        pending = facts.kernel.pending
        if pending and self.policy == "upgrade":
            ctx.state.target_kernel = pending
            ctx.require_reboot(f"kernel {pending} is installed, {running} is running")
            return self._hold_actions(facts, pending, held)
        headers = distro.headers_package(running, facts.kernel.package)
        upgrade = distro.newest_kernel_packages(running, facts.kernel.package)
        # `headers`: asked of apt only, and only when the facts the probe saw left a candidate to look up
        candidate, existing, following = _headers_probe(ctx.probe["headers"] if ctx.probe.asked("headers") else "")
        if distro.package_format == "deb" and candidate == "(none)" and self.policy != "upgrade":
            raise StepFailed(self._missing_message(running, headers, existing),
                             fix=self._missing_fix(running))
        if ctx.check and self.policy == "upgrade" and candidate in ("", "(none)"):
            self._predict_upgrade(ctx, upgrade, following)
        what = (f"install {headers}" if candidate not in ("", "(none)") else
                f"install {headers} if it exists, else the newest kernel ({', '.join(upgrade)}) and reboot"
                if self.policy == "upgrade" else f"install {headers}")
        headers_packages = distro.headers_packages(running, facts.kernel.package)
        command = f"sh -c {q(script_text('kernel_headers.sh'))} kernel-headers " + join(
            [self.policy, distro.headers_script_family, " ".join(headers_packages), *upgrade])
        # what the host-side script installs after its own `apt-get update`: the headers, or the newest kernel
        installs = headers_packages if candidate not in ("", "(none)") else \
            upgrade if self.policy == "upgrade" else []
        install = Action(what, f"no headers for the running kernel {running}", command, timeout=self.timeout,
                         fix=self._missing_fix(running), installs=tuple(installs), refreshes=True,
                         initramfs_once=distro.package_format == "deb")  # steps/initramfs_pause.py
        # hold: the kernel an apt upgrade installs is known now (the meta package's dependency), so it is held in
        # this run, not by the next one (which would then not be converged); elsewhere the next run holds it
        upgraded = following if self.policy == "upgrade" and candidate == "(none)" else ""
        # a transaction cut short (a power cut during the last run's install) is finished first: apt refuses to run
        repair = repair_first(ctx, manager_for(facts.os.package_manager), self.timeout)
        return [*repair, install, *(self._hold_actions(facts, upgraded, held) if upgraded else [])]

    @staticmethod
    def _predict_upgrade(ctx: StepContext, upgrade: list[str], following: str) -> None:
        """Check mode: what the real run's upgrade will leave behind, so that the steps after this one (the driver's
        build, the reboot) are planned for it. apt: the kernel the meta package's candidate depends on
        (what `kernel_headers.sh` installs and then boots); elsewhere the repositories are not asked in check
        mode: unknown until run."""
        running = ctx.facts.kernel.running
        if following and following != running:
            ctx.state.target_kernel = following
            ctx.require_reboot(f"new kernel {following} will be installed; {running} runs")
        elif not following:
            ctx.state.target_kernel_unknown = True
            ctx.require_reboot(f"would change (unknown until run): the newest kernel ({', '.join(upgrade)}) may be "
                               f"installed; {running} runs")

    def _hold_actions(self, facts: Facts, kernel: str, held: str) -> list[Action]:
        if not self.hold:
            return []
        manager = manager_for(facts.os.package_manager)
        wanted = for_os(facts.os).kernel_hold_packages(kernel, facts.kernel.package, facts.installed_packages)
        missing = [p for p in wanted if p not in manager.parse_held(held)]
        if not missing:
            return []
        return [Action(f"hold {', '.join(missing)}", f"kernel hold requested (the driver is built for {kernel})",
                       manager.hold(missing))]

    def apply(self, ctx: StepContext, actions: list[Action]) -> None:
        for action in actions:
            result = ctx.run(ctx.command_for(action) or "true", timeout=action.timeout, label=action.summary)
            if result.exit_code == NO_HEADERS_EXIT:
                existing = result.stderr.split("exist:", 1)[-1].split()
                running = ctx.facts.kernel.running
                headers = for_os(ctx.facts.os).headers_package(running, ctx.facts.kernel.package)
                raise StepFailed(self._missing_message(running, headers, existing),
                                 fix=self._missing_fix(running))
            if not result.ok:
                raise StepFailed(f"{action.summary} failed (exit {result.exit_code}):\n{result.tail()}",
                                 fix=action.fix)
            self._learn(ctx, result)

    def _learn(self, ctx: StepContext, result: ExecResult) -> None:
        for line in result.stdout.splitlines():
            if line.startswith("@@target "):
                ctx.state.target_kernel = line.split(None, 1)[1].strip()
        if "@@reboot" in result.stdout.split():
            ctx.require_reboot(f"new kernel {ctx.state.target_kernel} installed; {ctx.facts.kernel.running} runs")

    @staticmethod
    def _missing_message(running: str, headers: str, existing: list[str]) -> str:
        shown = ", ".join(existing[-8:]) if existing else "none found"
        return (f"no headers package exists for the running kernel {running} ({headers}); "
                f"headers that exist: {shown}. Nothing was installed: a driver built for another kernel "
                f"would not load.")

    @staticmethod
    def _missing_fix(running: str) -> str:
        return (f"set kernel_policy: upgrade to install the newest distro kernel with its headers and reboot into "
                f"it, or boot a kernel whose headers exist (a vendor or self-built kernel {running} needs its "
                f"own headers)")


def _headers_probe(text: str) -> tuple[str, list[str], str]:
    """The `headers` probe's answer: the running kernel's headers candidate ("(none)": no such package), the headers
    packages that exist, and (policy upgrade, only when that candidate is "(none)") the kernel the meta package
    would install."""
    candidate, *lines = text.splitlines() or [""]
    following = next((line.split()[-1] for line in lines if line.startswith("@@next ")), "")
    existing = [line for line in lines if not line.startswith("@@next ")]
    return candidate.strip(), existing, following if candidate.strip() == "(none)" else ""
