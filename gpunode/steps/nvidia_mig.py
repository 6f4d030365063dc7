"""`nvidia_mig`: MIG mode per GPU and its GPU/compute instances, from a layout written as one of
nvidia-mig-parted's `mig-configs` (github.com/NVIDIA/mig-parted, examples/config.yaml):

    config:
      - devices: all            # or [0, 1]: GPU indexes
        mig-enabled: true
        mig-devices: {"1g.10gb": 7}

Idempotent: the probe lists each GPU's mode and instances; a GPU whose mode and instances match is left alone, one
whose instances differ has them all destroyed and created again (as mig-parted's SetMigConfig does,
pkg/mig/config/config.go:125-148). Destroying instances under running processes is refused. MIG instances do not
survive a reboot (NVIDIA MIG user guide, "Creating GPU Instances"): run this step at every boot.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from gpunode.facts import Facts
from gpunode.parsers.errors import SmiParseError
from gpunode.parsers.mig import (
    GpuInstanceProfile,
    GpuProcess,
    MigMode,
    parse_compute_instances,
    parse_gpu_instance_profiles,
    parse_gpu_instances,
    parse_gpu_processes,
    parse_mig_modes,
)
from gpunode.parsers.smi_values import same_device
from gpunode.steps.base import Action, ArgumentError, Step, StepContext, StepFailed, arg, register
from gpunode.steps.probe import Snippets
from gpunode.values import as_bool

GUIDE = "https://docs.nvidia.com/datacenter/tesla/mig-user-guide/getting-started-with-mig.html"
PROFILE = re.compile(r"\d+g\.\d+gb(?:[+-][a-z0-9.]+)*")     # 1g.10gb, 1g.10gb+me, 1g.24gb+me.all
SHARE = re.compile(r"\d+c\.\d+g\.\d+gb\S*")                    # a compute-instance profile: 1c.3g.40gb
AMPERE = re.compile(r"\bA(?:100|30|800)\b")                    # MIG GPUs whose mode change needs a GPU reset
NO_SMI = ("nvidia-smi: not found", "nvidia-smi: command not found")
NO_DRIVER = "couldn't communicate with the NVIDIA driver"     # nvidia-smi runs, the kernel module is not loaded
NO_GPU = "No devices were found"                                # nvidia-smi runs, the driver sees no GPU
RESET_FIX = (f"stop what holds the GPU (nvsm, dcgm, nvidia-dcgm, dcgm-exporter, a kubelet's GPU pods: {GUIDE}"
             "#driver-clients) and run again, or set `reboot: true` to let this step reboot the host")


@dataclass(frozen=True)
class Wanted:
    """What one GPU should be: MIG on or off, and its instances (profile -> count)."""

    enabled: bool
    layout: Counter[str]


@dataclass
class Gpu:
    """One GPU as the probe saw it."""

    mode: MigMode
    layout: Counter[str]
    has_gis: bool
    has_cis: bool
    profiles: dict[str, GpuInstanceProfile]
    processes: list[GpuProcess]

    @property
    def label(self) -> str:
        return f"GPU {self.mode.index} ({self.mode.name}, {self.mode.bus_id})"

    @property
    def ampere(self) -> bool:
        return bool(AMPERE.search(self.mode.name or ""))


@register
@dataclass
class NvidiaMigStep(Step):
    """MIG mode and GPU/compute instances per GPU, as nvidia-mig-parted's config (one of its `mig-configs`).

    A mode change that stays pending (an A100/A30 needs a GPU reset; a Hopper GPU only when something held it) is
    made effective by resetting the pending GPUs (`nvidia-smi -r`, as mig-parted does) when nothing runs on them;
    where a reset cannot work (processes on the GPU, an A100/A30 in a VM) the host is rebooted if `reboot: true`,
    else the step fails and says what to do. With a reboot pending in the run (a new kernel or driver, `reboot: defer`)
    the layout waits for a run after it.
    """

    kind = "nvidia_mig"
    disturbs_gpus = True
    facts_sections = frozenset()
    config: list[dict[str, Any]] = arg(factory=list, doc=(
        "the layout: a list of {devices: all | [indexes], mig-enabled: true/false, mig-devices: {profile: count}} "
        "as one of nvidia-mig-parted's mig-configs; GPU-instance profiles (1g.10gb, 3g.40gb, 1g.10gb+me); [] does "
        "nothing"))
    gpu_reset: bool = arg(True, "reset the GPUs whose mode change is pending (nvidia-smi -r), when no process "
                                "uses them")
    reboot: bool = arg(False, "reboot the host where a GPU reset cannot make the mode take effect (processes on the "
                              "GPU, an A100/A30 in a VM); false: fail and say so")

    def __post_init__(self) -> None:
        _entries(self.config)  # validated here, before any host is contacted

    def probe(self, facts: Facts) -> Snippets | None:
        if not self.config:
            return None
        return {
            "gpus": "nvidia-smi --query-gpu=index,pci.bus_id,name,mig.mode.current,mig.mode.pending "
                    "--format=csv,noheader",
            "lgi": "nvidia-smi mig -lgi", "lci": "nvidia-smi mig -lci", "lgip": "nvidia-smi mig -lgip",
            "apps": "nvidia-smi --query-compute-apps=gpu_bus_id,pid,process_name --format=csv,noheader",
            "virt": "systemd-detect-virt --vm 2>/dev/null || true",
        }

    def plan(self, ctx: StepContext) -> list[Action]:
        if not self.config:
            return []
        if ctx.reboot_required:  # a new driver or kernel is not in use before it (reboot: defer, or check mode)
            why = "; ".join(ctx.state.reboot_reasons) or "an earlier step asked for one"
            ctx.notes.append(f"a reboot is pending ({why}): the MIG layout is applied after it (the driver it "
                             "brings is not loaded before, and MIG instances do not survive a reboot)")
            return []
        if NO_DRIVER in ctx.probe["gpus"]:
            raise StepFailed("the NVIDIA driver is not loaded (nvidia-smi couldn't communicate with it): MIG cannot "
                             "be configured", fix="reboot into the kernel the driver was built for (or `modprobe "
                             "nvidia`), then run again; `gpunode verify-gpu HOST` says what is wrong")
        if NO_GPU in ctx.probe["gpus"]:
            raise StepFailed("nvidia-smi finds no GPU: MIG cannot be configured",
                             fix="check that the instance type has NVIDIA GPUs (`gpunode verify-gpu HOST`), or leave "
                                 "the MIG layout empty for hosts without them")
        if any(marker in ctx.probe["gpus"] for marker in NO_SMI):
            if ctx.check:
                ctx.notes.append("nvidia-smi is not on the host yet: the MIG layout is planned once the driver is "
                                 "installed")
                return []
            raise StepFailed("nvidia-smi is not installed: MIG cannot be configured",
                             fix="install the NVIDIA driver first (the nvidia_driver step before this one)")
        try:
            gpus = _gpus(ctx)
        except SmiParseError as exc:
            raise StepFailed(f"the MIG probe could not be read: {exc.cause}", fix=exc.fix) from None
        wanted = _assign(_entries(self.config), gpus, ctx)
        return _Planner(self, ctx, gpus, in_vm=ctx.probe["virt"].strip() not in ("", "none")).plan(wanted)


class _Planner:
    """The actions for every GPU: destroy, set the mode, make it take effect (reset or reboot), create."""

    def __init__(self, step: NvidiaMigStep, ctx: StepContext, gpus: dict[int, Gpu], in_vm: bool) -> None:
        self.step, self.ctx, self.gpus, self.in_vm = step, ctx, gpus, in_vm

    def plan(self, wanted: dict[int, Wanted]) -> list[Action]:
        actions: list[Action] = []
        settle: list[Gpu] = []
        creates: list[Action] = []
        undiffed: list[str] = []  # GPUs whose only action is the shared reset: their diff goes on it
        for index, want in wanted.items():
            gpu = self.gpus[index]
            own, settle_it, create = self._gpu(gpu, want)
            target = own[0] if own else create
            if target is not None:
                target.diff = _diff(gpu, want)
            elif settle_it:
                undiffed.append(_diff(gpu, want))
            actions += own
            creates += [create] if create else []
            settle += [gpu] if settle_it else []
        settled, reboot = self._settle(settle)
        for action in [*settled, *([reboot] if reboot else [])][:1]:
            action.diff = "".join(undiffed) or None
        if reboot is not None:
            self.ctx.notes.append("the MIG instances are created by the next run, after the reboot")
            return [*actions, reboot]
        return [*actions, *settled, *creates]

    def _gpu(self, gpu: Gpu, want: Wanted) -> tuple[list[Action], bool, Action | None]:
        """One GPU: its destroy and set-mode actions, whether its mode must still take effect, its create action."""
        mode_change = gpu.mode.pending != want.enabled
        effective = gpu.mode.current == want.enabled and not mode_change
        relayout = want.enabled and gpu.layout != want.layout
        clear = gpu.mode.current is True and (gpu.has_gis or gpu.has_cis) and (relayout or not want.enabled)
        own = [self._destroy(gpu)] if clear else []
        own += [self._set_mode(gpu, want.enabled)] if mode_change else []
        wants_instances = want.enabled and bool(want.layout) and (relayout or not effective)
        return own, not effective, self._create(gpu, want.layout) if wants_instances else None

    def _destroy(self, gpu: Gpu) -> Action:
        if gpu.processes:
            raise StepFailed(f"{gpu.label} has its MIG instances in use by {_procs(gpu.processes)}: destroying them "
                             "would kill that work, so the layout was not changed",
                             fix="stop those processes (drain the node's GPU pods or jobs), then run again")
        parts = ([f"nvidia-smi mig -i {gpu.mode.index} -dci"] if gpu.has_cis else []) + \
            ([f"nvidia-smi mig -i {gpu.mode.index} -dgi"] if gpu.has_gis else [])
        return Action(f"destroy the MIG instances of GPU {gpu.mode.index}",
                      f"{gpu.label} holds {_show(gpu.layout)}; compute instances go before their GPU instances "
                      f"({GUIDE}#destroying-gpu-instances)", " && ".join(parts),
                      fix="a process may have started on the GPU since the probe: stop it and run again")

    def _set_mode(self, gpu: Gpu, enabled: bool) -> Action:
        word = "enable" if enabled else "disable"
        return Action(f"{word} MIG on GPU {gpu.mode.index}",
                      f"{gpu.label} has MIG {_mode(gpu.mode)}, the layout wants it {word}d",
                      f"nvidia-smi -i {gpu.mode.index} -mig {int(enabled)}", fix=RESET_FIX)

    def _create(self, gpu: Gpu, layout: Counter[str]) -> Action:
        _check_fits(gpu, layout)
        order = sorted(layout.elements(), key=lambda p: (-_slices(p), p))  # 3g.20gb first: MIG guide, "Example 2"
        ids = [str(gpu.profiles[p].profile_id) if p in gpu.profiles else p for p in order]
        return Action(f"create MIG instances on GPU {gpu.mode.index}: {_show(layout)}",
                      f"{gpu.label} holds {_show(gpu.layout) or 'no instances'}; each GPU instance gets its "
                      f"compute instance (-C), largest first ({GUIDE}#instance-geometry)",
                      f"nvidia-smi mig -i {gpu.mode.index} -cgi {','.join(ids)} -C",
                      fix="the GPU may lack room for that mix (`nvidia-smi mig -lgipp` lists the placements): "
                          "change the layout")

    def _settle(self, gpus: list[Gpu]) -> tuple[list[Action], Action | None]:
        """Make pending mode changes take effect: reset the GPUs still pending, or reboot, or refuse."""
        blocked = [g for g in gpus if self._blocked(g)]
        if not blocked:
            if not gpus or not self.step.gpu_reset:
                return [], None  # (without a reset: Hopper and later, whose mode took effect when it was set)
            ids = ",".join(g.mode.bus_id or str(g.mode.index) for g in gpus)
            return [Action(f"reset the GPUs whose MIG mode is pending ({ids})",
                           "a MIG mode change takes effect after a GPU reset; mig-parted resets the pending GPUs "
                           "(cmd/nvidia-mig-parted/util/device.go:153); Hopper and later need none and are "
                           f"skipped when not pending ({GUIDE}#enable-mig-mode)", _reset_command(ids),
                           fix=RESET_FIX)], None
        why = "; ".join(_blocked_reason(g, self.in_vm) for g in blocked)
        if any(not g.ampere for g in blocked):
            raise StepFailed(f"the MIG mode change cannot take effect: {why}; a reboot would not help: Hopper and "
                             f"later GPUs forget MIG mode when the driver reloads ({GUIDE}#gpu-reset-on-hopper-gpus)",
                             fix="stop the processes named (and nvsm, dcgm, dcgm-exporter if they run), then run "
                                 "again" if any(g.processes for g in blocked) else "set `gpu_reset: true`")
        if self.step.reboot:
            return [], Action("reboot", f"MIG mode change pending and no GPU reset possible: {why}", reboot=True,
                              timeout=900)
        raise StepFailed(f"the MIG mode change needs a GPU reset that cannot be done now: {why}",
                         fix=RESET_FIX if any(g.processes for g in blocked) else
                         "reboot the host (or set `reboot: true`), then run again")

    def _blocked(self, gpu: Gpu) -> bool:
        """A GPU reset cannot (or may not) make this GPU's mode take effect."""
        needs_reset = gpu.ampere or gpu.mode.change_pending
        return bool(gpu.processes) or (self.in_vm and gpu.ampere) or (not self.step.gpu_reset and needs_reset)


# ---- the probe's output per GPU -----------------------------------------------------------------------------------
def _gpus(ctx: StepContext) -> dict[int, Gpu]:
    modes = parse_mig_modes(ctx.probe["gpus"])
    gis, cis = parse_gpu_instances(ctx.probe["lgi"]), parse_compute_instances(ctx.probe["lci"])
    profiles = parse_gpu_instance_profiles(ctx.probe["lgip"])
    apps = parse_gpu_processes(ctx.probe["apps"])
    found = {}
    for position, mode in enumerate(modes):
        index = mode.index if mode.index is not None else position
        mine_gi = [g for g in gis if g.gpu == index]
        mine_ci = [c for c in cis if c.gpu == index]
        layout: Counter[str] = Counter()
        for gi in mine_gi:
            inside = [c for c in mine_ci if c.gpu_instance_id == gi.instance_id]
            if not inside:
                layout[f"{gi.profile} without a compute instance"] += 1
            for ci in inside:
                layout[gi.profile if ci.profile == gi.profile.split("+")[0] else ci.profile] += 1
        found[index] = Gpu(mode, layout, bool(mine_gi), bool(mine_ci),
                           {p.name: p for p in profiles if p.gpu == index},
                           [a for a in apps if same_device(a.gpu, mode.bus_id)])
    return found


def _assign(entries: list[tuple[list[int] | None, bool, Counter[str]]], gpus: dict[int, Gpu],
            ctx: StepContext) -> dict[int, Wanted]:
    """Each GPU's wanted state; a GPU without MIG is skipped under `devices: all` and refused when named
    (mig-parted cmd/nvidia-mig-parted/apply/mode.go:68-79)."""
    wanted: dict[int, Wanted] = {}
    for devices, enabled, layout in entries:
        for index in devices if devices is not None else sorted(gpus):
            if index not in gpus:
                raise StepFailed(f"the MIG layout names GPU {index}, the host has GPUs {sorted(gpus) or 'none'}",
                                 fix="name the GPUs by their nvidia-smi index, or use `devices: all`")
            gpu = gpus[index]
            if not gpu.mode.capable:
                if enabled and devices is not None:
                    raise StepFailed(f"{gpu.label} has no MIG (nvidia-smi reports its mode as [N/A])",
                                     fix="take it out of `devices`, or use `devices: all` to skip GPUs without MIG")
                ctx.notes.append(f"{gpu.label} has no MIG: skipped")
                continue
            wanted[index] = Wanted(enabled, layout)
    return wanted


def _entries(config: list[dict[str, Any]]) -> list[tuple[list[int] | None, bool, Counter[str]]]:
    """The config's entries checked: (GPU indexes or None for all, MIG on, layout); raises ArgumentError (its
    `arg` names `config`, so that a refusal names the variable the layout came from)."""
    try:
        return _checked(config)
    except ValueError as exc:
        raise ArgumentError(str(exc), arg="config") from None


def _checked(config: list[dict[str, Any]]) -> list[tuple[list[int] | None, bool, Counter[str]]]:
    out: list[tuple[list[int] | None, bool, Counter[str]]] = []
    seen: set[str | tuple[int, ...]] = set()
    for number, entry in enumerate(config):
        where = f"nvidia_mig.config[{number}]"  # 0-based, as the type check names an item (config[0])
        unknown = set(entry) - {"devices", "mig-enabled", "mig-devices", "mig_enabled", "mig_devices"}
        if unknown:
            raise ValueError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}; known: devices, mig-enabled, "
                             "mig-devices")
        devices = _devices(entry.get("devices", "all"), where)
        enabled = as_bool(entry.get("mig-enabled", entry.get("mig_enabled")))  # yes/no, "true"... as Ansible
        if enabled is None:
            raise ValueError(f"{where}: mig-enabled must be true or false")
        layout = _layout(entry.get("mig-devices", entry.get("mig_devices")) or {}, where)
        if layout and not enabled:
            raise ValueError(f"{where}: mig-devices with mig-enabled: false")
        key = "all" if devices is None else tuple(devices)
        if key in seen or (devices is None and seen) or (devices is not None and "all" in seen):
            raise ValueError(f"{where}: a GPU is named by two entries")
        seen.add(key)
        out.append((devices, enabled, layout))
    return out


def _devices(value: Any, where: str) -> list[int] | None:
    if value == "all":
        return None
    items = value if isinstance(value, list) else [value]
    if not items or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in items):
        raise ValueError(f"{where}: devices must be `all` or a list of GPU indexes, got {value!r}")
    return list(items)


def _layout(value: Any, where: str) -> Counter[str]:
    if not isinstance(value, dict):
        raise ValueError(f"{where}: mig-devices must be a mapping of profile: count")
    layout: Counter[str] = Counter()
    for name, count in value.items():
        if SHARE.fullmatch(str(name)):
            raise ValueError(f"{where}: {name} is a compute-instance profile; this step creates whole GPU "
                             "instances (one compute instance each): use a GPU-instance profile such as "
                             f"{str(name).split('.', 1)[1]}")
        if not PROFILE.fullmatch(str(name)) or not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise ValueError(f"{where}: mig-devices wants profile: count, e.g. \"1g.10gb\": 7; got {name!r}: "
                             f"{count!r}")
        layout[str(name)] = count
    return layout


# ---- words ---------------------------------------------------------------------------------------------------------
def _check_fits(gpu: Gpu, layout: Counter[str]) -> None:
    if not gpu.profiles:
        return  # MIG is off on an A100/A30: its profiles are listed once it is on
    for name, count in layout.items():
        offered = gpu.profiles.get(name)
        if offered is None:
            raise StepFailed(f"{gpu.label} has no MIG profile {name}; it offers {', '.join(gpu.profiles)}",
                             fix="use one of its profiles (they name its memory: 1g.10gb on an H100 80GB, 1g.5gb "
                                 "on an A100 40GB)")
        if count > offered.total:
            raise StepFailed(f"{gpu.label} holds at most {offered.total} x {name}, the layout asks {count}",
                             fix="lower the count")


def _slices(profile: str) -> int:
    return int(profile.split("g.", 1)[0])


def _show(layout: Counter[str]) -> str:
    return ", ".join(f"{count} x {name}" for name, count in sorted(layout.items()))


def _mode(mode: MigMode) -> str:
    now = "enabled" if mode.current else "disabled"
    if mode.change_pending:
        return f"{now} ({'enabled' if mode.pending else 'disabled'} pending a GPU reset)"
    return now


def _diff(gpu: Gpu, want: Wanted) -> str:
    """The GPU now and as planned, as diff lines."""
    now = [f"MIG: {_mode(gpu.mode)}", *(f"{n} x {p}" for p, n in sorted(gpu.layout.items()))]
    planned = [f"MIG: {'enabled' if want.enabled else 'disabled'}",
               *(f"{n} x {p}" for p, n in sorted(want.layout.items()))]
    lines = [f"{gpu.label}\n"]
    lines += [f"-{line}\n" for line in now if line not in planned]
    lines += [f"+{line}\n" for line in planned if line not in now]
    return "".join(lines)


def _procs(processes: list[GpuProcess]) -> str:
    return ", ".join(f"pid {p.pid} ({p.name})" for p in processes)


def _blocked_reason(gpu: Gpu, in_vm: bool) -> str:
    if gpu.processes:
        return f"{gpu.label} is used by {_procs(gpu.processes)} (a reset needs an idle GPU)"
    if in_vm and gpu.ampere:
        return (f"{gpu.label} is an A100/A30 in a VM, where the hypervisor may refuse a GPU reset "
                f"({GUIDE}#gpu-reset-on-nvidia-ampere-architecture-gpus)")
    return f"{gpu.label} needs a GPU reset and gpu_reset is false"


def _reset_command(ids: str) -> str:
    """Reset those of the GPUs whose MIG mode is still pending after it was set (none on Hopper and later)."""
    return (f"pending=$(nvidia-smi -i {ids} --query-gpu=pci.bus_id,mig.mode.current,mig.mode.pending "
            "--format=csv,noheader | awk -F', ' '$2 != $3 {print $1}' | paste -sd, -); "
            '[ -z "$pending" ] || nvidia-smi -r -i "$pending"')
