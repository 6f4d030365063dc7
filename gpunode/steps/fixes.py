"""What to tell the user when a step's command fails: the fix its exit code or output points at."""

from __future__ import annotations

import re
from typing import Protocol

from gpunode.connection import ExecResult
from gpunode.errors import disk_full_fix


class FailedAction(Protocol):
    """What `action_fix` reads of the failed action (steps/model.py `Action`)."""

    fix: str
    writes: str


def failure_fix(output: str, writing: str = "") -> str:
    """A fix that the output itself points at (a full disk, where `writing` is the file written), whatever the
    command was; "" when none."""
    return disk_full_fix(output, writing)


def killed_fix(exit_code: int | None) -> str:
    """A fix for a command killed by a signal (a shell's exit 128 + N); "" for an ordinary failure."""
    if exit_code is None or not 128 < exit_code <= 128 + 64:
        return ""
    signal = exit_code - 128
    if signal == 9:
        return ("the command was killed (exit 137: SIGKILL), most often by the kernel's out-of-memory killer (on the "
                "host: `journalctl -k | grep -i 'out of memory'`) or by a person or a watchdog; free memory or give "
                "the host more, then run again (an interrupted dpkg is repaired by the next run)")
    name = {15: "SIGTERM (a shutdown, systemd or a person stopped it)", 2: "SIGINT", 1: "SIGHUP"}.get(signal, "")
    return (f"the command was killed by signal {signal}{' = ' + name if name else ''} (exit {exit_code}), not a "
            "failure of its own; find what stopped it (the host's journal), then run again")


# the shell's own words for a program it cannot find: dash `sh: 1: gpg: not found`, bash `bash: line 1: gpg: command
# not found` or `bash: gpg: command not found`
_NOT_FOUND = re.compile(r"^(?:/bin/|/usr/bin/)?(?:ba|da)?sh: (?:line )?(?:\d+: )?([^\s:]+): (?:command )?not found\s*$",
                        re.MULTILINE)


# programs the `nvidia_driver` step installs with the driver (the distro packages of the same names:
# the distro adapters' distro_driver_packages in gpunode/distros/): the `base` playbook never provides them
_DRIVER_PROGRAMS = ("nvidia-smi", "nvidia-persistenced")


def missing_program_fix(output: str) -> str:
    """A fix for a command that failed because the shell found no such program; "" otherwise."""
    names = list(dict.fromkeys(_NOT_FOUND.findall(output)))
    if not names:
        return ""
    if any(name in _DRIVER_PROGRAMS for name in names):
        return (f"the host has no {', '.join(names)}: the NVIDIA driver is not installed; install it first (an "
                "`nvidia_driver` step before this one, or the built-in `gpu-node` playbook: `gpunode provision "
                "-i INVENTORY --playbook gpu-node`)")
    return (f"the host has no {', '.join(names)}: the shell found no such program; install the package "
            "that provides it first (a `packages` step before this one, or the built-in `base` playbook)")


def action_fix(action: FailedAction, result: ExecResult) -> str:
    """What to tell the user: a kill by a signal (OOM), a program the host lacks or what the output points at (a
    full disk) first; for a file write, that the old file was kept; else the action's own fix."""
    output = result.stdout + result.stderr
    pointed = killed_fix(result.exit_code) or missing_program_fix(output) or failure_fix(output, action.writes)
    if pointed:
        return f"{pointed}; {action.fix}" if action.writes and action.fix else pointed
    return action.fix or "read the output above and the host's log; fix the cause and run again"
