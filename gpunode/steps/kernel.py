"""`kernel_headers`: headers for the running kernel, or a newer distro kernel + headers and a reboot."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from gpunode.connection import ExecResult, join, q
from gpunode.facts import Facts
from gpunode.gpu.distro import headers_package, newest_kernel_packages
from gpunode.scripts import script_text
from gpunode.steps.base import Action, Step, StepContext, StepFailed, register

NO_HEADERS_EXIT = 10


def _version_key(kernel: str) -> list[int]:
    return [int(n) for n in re.findall(r"\d+", kernel)]


@register
@dataclass
class KernelHeadersStep(Step):
    """Never build modules for the wrong kernel: headers for the running one, or (policy upgrade) a newer one."""

    kind = "kernel_headers"
    policy: Literal["require", "upgrade"] = "require"
    hold: bool = False
    timeout: int = 1800

    def probe(self, facts: Facts) -> str:
        if facts.os.family == "debian":
            pkg = q(headers_package(facts.os, facts.kernel.running))
            return (f"apt-cache policy {pkg} 2>/dev/null | sed -n 's/^ *Candidate: //p'; echo @@; "
                    "apt-cache pkgnames linux-headers- 2>/dev/null | grep -E '^linux-headers-[0-9]' | "
                    "grep -v -- -common | sort -V | tail -n 12; echo @@; apt-mark showhold 2>/dev/null")
        return "echo; echo @@; echo @@; rpm -q --qf '%{NAME}\\n' python3-dnf-plugin-versionlock 2>/dev/null"

    def _pending_kernel(self, facts: Facts) -> str | None:
        """The newest installed distro kernel with headers: a previous run upgraded and the reboot is pending.

        Not compared with the running kernel: a vendor or custom kernel may carry a higher version number.
        """
        ready = [k for k in facts.kernel.installed if k in facts.kernel.headers and k != facts.kernel.running]
        return max(ready, key=_version_key) if ready else None

    def plan(self, ctx: StepContext) -> list[Action]:
        facts = ctx.facts
        running = facts.kernel.running
        candidate, existing, held = (ctx.probe_output.split("@@") + ["", "", ""])[:3]
        if facts.kernel.running_headers_present:
            ctx.shared["target_kernel"] = running
            return self._hold_actions(facts, running, held)
        pending = self._pending_kernel(facts)
        if pending and self.policy == "upgrade":
            ctx.shared["target_kernel"] = pending
            ctx.require_reboot(f"kernel {pending} is installed, {running} is running")
            return self._hold_actions(facts, pending, held)
        headers = headers_package(facts.os, running)
        upgrade = newest_kernel_packages(facts.os, running)
        candidate = candidate.strip()
        if facts.os.family == "debian" and candidate == "(none)" and self.policy != "upgrade":
            raise StepFailed(self._missing_message(running, headers, existing.split()),
                             fix=self._missing_fix(running))
        family = "debian" if facts.os.family == "debian" else "rpm"
        what = (f"install {headers}" if candidate not in ("", "(none)") else
                f"install {headers} if it exists, else the newest kernel ({', '.join(upgrade)}) and reboot"
                if self.policy == "upgrade" else f"install {headers}")
        command = f"sh -c {q(script_text('kernel_headers.sh'))} kernel-headers " + join(
            [self.policy, family, headers, *upgrade])
        return [Action(what, f"no headers for the running kernel {running}", command, timeout=self.timeout,
                       fix=self._missing_fix(running))]

    def _hold_actions(self, facts: Facts, kernel: str, held: str) -> list[Action]:
        if not self.hold or facts.os.family != "debian":
            return []
        wanted = [f"linux-image-{kernel}", f"linux-headers-{kernel}"]
        missing = [p for p in wanted if p not in held.split()]
        if not missing:
            return []
        return [Action(f"hold {', '.join(missing)}", "kernel hold requested", f"apt-mark hold {join(missing)}")]

    def apply(self, ctx: StepContext, actions: list[Action]) -> None:
        for action in actions:
            result = ctx.run(action.command or "true", timeout=action.timeout, label=action.summary)
            if result.exit_code == NO_HEADERS_EXIT:
                existing = result.stderr.split("exist:", 1)[-1].split()
                running = ctx.facts.kernel.running
                raise StepFailed(self._missing_message(running, headers_package(ctx.facts.os, running), existing),
                                 fix=self._missing_fix(running))
            if not result.ok:
                raise StepFailed(f"{action.summary} failed (exit {result.exit_code}):\n{result.tail()}",
                                 fix=action.fix)
            self._learn(ctx, result)

    def _learn(self, ctx: StepContext, result: ExecResult) -> None:
        for line in result.stdout.splitlines():
            if line.startswith("@@target "):
                ctx.shared["target_kernel"] = line.split(None, 1)[1].strip()
        if "@@reboot" in result.stdout.split():
            ctx.require_reboot(f"new kernel {ctx.shared['target_kernel']} installed; {ctx.facts.kernel.running} runs")

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
