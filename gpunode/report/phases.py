"""Time to ready per host, phase by phase (issue 40): package manager wait, kernel and headers, driver packages,
module (from the cache or built), initramfs, services, verify, and gpunode's own time (connect, lock + facts,
probes, release).

Made from what the run recorded, nothing guessed: each step's time (its kind says its phase), each command the step
ran (its label can say better: a module cache install inside the driver step is `module`), and the phases timed
inside a command from its output (connection/marks.py: each initramfs generation, each DKMS build), which are
taken out of that command's share. So the phases add up to the host's time, less the time between steps."""

from __future__ import annotations

import re
from collections.abc import Sequence

from gpunode.connection.marks import Mark
from gpunode.connection.transcript import ExecRecord
from gpunode.report.model import StepOutcome

PHASES = ("package manager wait", "kernel and headers", "driver packages", "module", "initramfs", "services",
          "verify", "reboot", "other steps", "gpunode")
STEP_PHASES = {"wait_for_package_manager": "package manager wait", "kernel_headers": "kernel and headers",
               "nvidia_driver": "driver packages", "dkms_module": "module", "reboot": "reboot",
               "service": "services", "docker": "services", "container_toolkit": "services",
               "container_runtime": "services", "image_validate": "verify"}
# the commands inside a step that belong to another phase, by the summary the step gives them (their label):
# gpunode/steps/module_cache.py plan_module and module_finish, nvidia_dkms.py dkms_actions, nvidia_nouveau.py
# initramfs_actions, nvidia_fabric.py ready_actions, nvidia.py _keep_actions
LABEL_PHASES = (
    # `what` is "module/version for kernel K" (plan_module) or a cache key's label "module/version for K (arch)"
    (re.compile(r"^((install|place) \S+/\S+ for .* from the (module cache|tree in place)"
                r"|(build|pack) \S+/\S+ for .* (with DKMS|for the module cache)"
                r"|wait for .* DKMS build of \S+/\S+ for |install the \S+ DKMS module for kernel)"), "module"),
    (re.compile(r"^rebuild the initramfs"), "initramfs"),
    (re.compile(r"^(load the driver and start|enable nvidia-persistenced)"), "services"),
    (re.compile(r"^nvidia-smi"), "verify"),
)
READY_PHASES = ("kernel and headers", "driver packages", "module", "initramfs")  # a run that did GPU node work
MARK_PHASES = {"initramfs": "initramfs", "dkms build": "module"}
OVERHEAD = ("connect", "lock + facts", "render", "probe", "release")  # HostOutcome.phases outside the steps


def label_phase(label: str) -> str | None:
    """The phase a command's label names, or None (then it is its step's)."""
    return next((phase for pattern, phase in LABEL_PHASES if pattern.match(label)), None)


def phase_times(steps: Sequence[StepOutcome], records: Sequence[ExecRecord], marks: Sequence[Mark],
                overhead: dict[str, float]) -> dict[str, float]:
    """Seconds per phase (those with time, in PHASES order) for one host's run."""
    kinds = {step.name: step.kind for step in steps}
    times = dict.fromkeys(PHASES, 0.0)
    carved = [0.0] * len(records)   # per command: the seconds its marks took
    for mark in marks:
        if 0 <= mark.command < len(records) and records[mark.command].activity in kinds:
            times[MARK_PHASES[mark.kind]] += mark.seconds
            carved[mark.command] += mark.seconds
    in_commands: dict[str, float] = {}
    for index, record in enumerate(records):
        if record.activity not in kinds:
            continue
        phase = label_phase(record.label) or STEP_PHASES.get(kinds[record.activity], "other steps")
        times[phase] += max(0.0, record.seconds - carved[index])
        in_commands[record.activity] = in_commands.get(record.activity, 0.0) + record.seconds
    for step in steps:  # planning, the step's probe, file transfers: the step's own phase
        times[STEP_PHASES.get(step.kind, "other steps")] += max(0.0, step.seconds - in_commands.pop(step.name, 0.0))
    times["gpunode"] = sum(overhead.get(name, 0.0) for name in OVERHEAD)
    return {name: round(seconds, 3) for name, seconds in times.items() if seconds > 0.0005}


def phase_line(times: dict[str, float]) -> str:
    """`kernel and headers 12.3s, driver packages 8.1s, ...` for the host log and the summary."""
    return ", ".join(f"{name} {seconds:.1f}s" for name, seconds in times.items())


def generation_line(mark: dict) -> str:
    """One initramfs generation or DKMS build for the host log."""
    after = f" after '{mark['after']}'" if mark["after"] else ""
    return f"{mark['kind']}: {mark['what'] or '?'}{after} in '{mark['command']}': {mark['seconds']:.1f}s"
