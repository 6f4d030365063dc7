"""`dcgm`: NVIDIA DCGM 4 from NVIDIA's CUDA repository, for the CUDA major the installed driver supports, its
service enabled and running (issue 38). The packages, the probe of the CUDA major and the service are the vendor's
(gpunode/distros/repos.py, table `nvidia-dcgm`); the repository is added as the driver's cuda-repo method adds it."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass

from gpunode.connection import q
from gpunode.distros import UnsupportedDistro, for_os
from gpunode.distros.repos import DCGM
from gpunode.facts import Facts
from gpunode.parsers.systemd import UnitState, parse_unit
from gpunode.steps.base import Action, Step, StepContext, StepFailed, arg, register
from gpunode.steps.nvidia_install import fetch_tools_first
from gpunode.steps.packages import repair_first
from gpunode.steps.pkgmgr import AptManager, PackageManager, Wanted, manager_for
from gpunode.steps.probe import Snippets, nested
from gpunode.steps.service import verified
from gpunode.vendor_facts import value

VERSION = re.compile(r"[0-9][A-Za-z0-9._+:~*-]*")
SERVICE: str = value(DCGM, "service")
MAJOR_VAR = "dcgm_cuda_major"  # the probe's shell variable holding the CUDA major nvidia-smi printed


def packages(major: int) -> list[str]:
    """DCGM 4's packages for one CUDA major: the CUDA-specific one and the core package beside it."""
    return [str(value(DCGM, "cuda_package")).format(major=major), str(value(DCGM, "core_package"))]


def pinned_by(installed: str | None, version: str | None) -> bool:
    """An installed version is the one asked for: any without a pin; else equal, a glob match, or the same upstream
    version with a packaging release (4.4.2 is 4.4.2-1), an apt epoch (1:) left out of either side."""
    if installed is None:
        return False
    if version is None:
        return True
    have, want = installed.partition(":")[2] or installed, version.partition(":")[2] or version
    return have == want or fnmatch.fnmatch(have, want) or have.startswith(f"{want}-")


@register
@dataclass
class DcgmStep(Step):
    """Install NVIDIA DCGM 4 the vendor's way: NVIDIA's CUDA repository (added as the driver's cuda-repo method adds
    it), `datacenter-gpu-manager-4-cuda<MAJOR>` for the CUDA major the driver supports (nvidia-smi's
    "CUDA Version: X.Y") with `datacenter-gpu-manager-4-core`, then `nvidia-dcgm` enabled and running. Refused on a
    distribution NVIDIA does not list for DCGM, and without a driver unless `cuda_major` is given."""

    kind = "dcgm"
    facts_sections = frozenset({"pkgmgr", "packages", "gpu"})
    version: str | None = arg(None, "DCGM version to pin both packages to (apt `=V`, e.g. 1:4.4.2-1; dnf `-V`, e.g. "
                                    "4.4.2); none: the newest, then kept")
    cuda_major: int | None = arg(None, "the CUDA major the packages target; none: the major of nvidia-smi's "
                                       "`CUDA Version` (the driver must be installed and loaded)")
    install_recommends: bool = arg(True, "the recommended DCGM packages too (as Azure's HPC images install them: "
                                         "dnf install_weak_deps=True)")
    timeout: int = arg(1800, "seconds")

    def __post_init__(self) -> None:
        if self.version is not None and not VERSION.fullmatch(self.version):
            raise ValueError(f"dcgm.version: {self.version!r} is not a package version (e.g. 1:4.4.2-1 or 4.4.2)")
        if self.cuda_major is not None and not 10 <= self.cuda_major <= 99:
            raise ValueError(f"dcgm.cuda_major: {self.cuda_major} is not a CUDA major version (e.g. 12 or 13)")

    def probe(self, facts: Facts) -> Snippets:
        manager = manager_for(facts.os.package_manager)
        pkgs = manager.probe(packages(self.cuda_major or 0))
        snippets = {"unit": "systemctl show -p LoadState -p ActiveState -p SubState -p UnitFileState "
                            f"-p NeedDaemonReload -- {SERVICE} 2>&1"}
        if not self.cuda_major:  # the CUDA package's name is known on the host only: asked with the major it prints
            cuda = f"{{ {value(DCGM, 'cuda_major_probe')}; }} 2>/dev/null | head -n 1"
            snippets["cuda"] = cuda
            asked = '"' + str(value(DCGM, "cuda_package")).format(major=f"${{{MAJOR_VAR}}}") + '"'
            unknown = packages(0)[0]
            pkgs = {name: f"{MAJOR_VAR}=$({cuda}); {text.replace(unknown, asked)}"
                    if unknown in text else text for name, text in pkgs.items()}
        return {**nested("pkgs", pkgs), **snippets}

    def plan(self, ctx: StepContext) -> list[Action]:
        facts = ctx.facts
        try:
            distro = for_os(facts.os)
            distro.check_dcgm_supported()
            setup = distro.cuda_repo_setup()
        except UnsupportedDistro as exc:
            raise StepFailed(str(exc), fix=exc.fix) from None
        manager = manager_for(facts.os.package_manager)
        major = self.cuda_major or self._major(ctx)
        if major is None:  # check mode: the driver this run installs or loads decides the package
            return [Action(f"install DCGM 4 ({', '.join(packages(0)).replace('cuda0', 'cuda<MAJOR>')}) and enable "
                           f"{SERVICE}", f"would change (unknown until run): {self._pending(ctx)}")]
        installed = manager.parse(ctx.probe.within("pkgs")).installed
        missing = [Wanted(n, self.version) for n in packages(major) if not pinned_by(installed.get(n), self.version)]
        actions = [self._install(ctx, manager, fetch_tools_first(facts, manager, setup), missing, installed, major)] \
            if missing else []
        actions += self._service(parse_unit(ctx.probe["unit"]), bool(missing))
        return repair_first(ctx, manager, self.timeout) + actions if actions else []

    def _major(self, ctx: StepContext) -> int | None:
        """The CUDA major nvidia-smi printed; None in check mode when the driver comes or loads in this run (_pending);
        a failure when there is no driver to ask."""
        printed = ctx.probe["cuda"].strip()
        if printed.isdigit():
            return int(printed)
        if ctx.check and self._pending(ctx):
            return None
        raise StepFailed("nvidia-smi printed no CUDA version: no NVIDIA driver is installed and loaded, and DCGM 4's "
                         "package is chosen by the CUDA major the driver supports",
                         fix="install the driver first (the nvidia_driver step, then reboot), or set the dcgm step's "
                         "cuda_major (e.g. 12 or 13)")

    @staticmethod
    def _pending(ctx: StepContext) -> str:
        """Why nvidia-smi may answer in the run though it did not now (check mode): "" when nothing says so."""
        state, driver = ctx.state, ctx.facts.nvidia.driver_version
        coming = [n for n in state.installing if "nvidia" in n or "cuda" in n]  # every driver package's name has one
        if coming:
            return f"the CUDA major comes from the driver, and earlier steps install {', '.join(coming)}"
        if state.reboot_required:
            return "the CUDA major comes from the driver, which the reboot this run plans loads"
        if driver:
            return f"the CUDA major comes from the driver ({driver}), which nvidia-smi did not answer for yet"
        return ""

    def _install(self, ctx: StepContext, manager: PackageManager, setup: str, missing: list[Wanted],
                 installed: dict[str, str], major: int) -> Action:
        """One command: NVIDIA's CUDA repository (when not there yet), then the missing packages."""
        ctx.will_install(w.name for w in missing)
        # a pin is the version wanted, older or newer than the installed one (apt: --allow-downgrades)
        install = manager.install(missing, refresh=ctx.lists_stale or bool(setup), recommends=self.install_recommends,
                                  downgrades=bool(self.version))
        reasons = [f"{w.name} is {installed[w.name]}, wanted {w.version}" if w.name in installed
                   else f"{w.name} is not installed" for w in missing]
        pin = f" {self.version}" if self.version else ""
        source = "cuda_major" if self.cuda_major else "nvidia-smi"
        return Action(
            f"install DCGM 4{pin} for CUDA {major}: {', '.join(w.name for w in missing)}",
            f"{'; '.join(reasons)} (CUDA {major} from {source})", f"{setup} && {{ {install}; }}",
            timeout=self.timeout, installs=tuple(AptManager.specs(missing)), recommends=self.install_recommends,
            fix="check that NVIDIA's CUDA repository is reachable and carries the packages for this release "
            "(apt-cache policy / dnf list datacenter-gpu-manager-4-*), and the version asked for")

    @staticmethod
    def _service(unit: UnitState, installing: bool) -> list[Action]:
        """`nvidia-dcgm` enabled and running, checked active a second after it starts; a unit a planned install
        brings counts as disabled and stopped."""
        absent = unit.not_found or unit.load_state is None  # None: systemd printed nothing (no unit files yet)
        if absent and not installing:
            raise StepFailed(f"the DCGM packages are installed but the {SERVICE} unit is not found",
                             fix=f"reinstall {', '.join(packages(0)).replace('cuda0', 'cuda<MAJOR>')} and look at "
                             f"`systemctl status {SERVICE}`")
        new = absent and installing
        enable = new or not unit.enabled
        start = new or not unit.running
        if not (enable or start):
            return []
        verbs = [v for v, needed in (("enable", enable), ("start", start)) if needed]
        command = " && ".join(([f"systemctl enable -- {q(SERVICE)}"] if enable else [])
                              + ([f"{{ {verified('start', SERVICE)}; }}"] if start else []))
        why = "the packages being installed bring it" if new else \
            f"unit file state {unit.unit_file_state}, {unit.active_state}"
        return [Action(f"{' and '.join(verbs)} {SERVICE}", why, command,
                       fix=f"look at `journalctl -u {SERVICE}` on the host for why it does not start")]
