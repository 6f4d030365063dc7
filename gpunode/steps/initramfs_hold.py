"""The end of the initramfs pause the run's package installs hold (steps/initramfs_pause.py), as a command of its
own (the host log and the report's `timed` name it): before the first later command that is not an install or a
file write (StepContext.command_for), before a reboot and at the end of the host's run, whatever happened
(runner/host_run.py), so that no host is left with its initramfs updates paused."""

from __future__ import annotations

from gpunode.connection import Connection
from gpunode.errors import GpunodeError
from gpunode.steps.initramfs_pause import CONF, FLUSH, MARK
from gpunode.steps.state import HostState

LABEL = "initramfs: the one generation after this run's package installs"
FIX = (f"see the update-initramfs output in the host log; /boot must have room for the image; then remove the line "
       f"ending in '{MARK}' from {CONF} (if still there) and run update-initramfs -u")


def end_hold(conn: Connection, state: HostState, before: str = "") -> None:
    """Run the one generation if an install of this run left the pause held; raises GpunodeError if it fails.
    `before`: what comes next (the step named in the error), e.g. "reboot"."""
    if not state.initramfs_held:
        return
    state.initramfs_held = False
    result = conn.run(FLUSH, timeout=900, label=LABEL)
    if not result.ok:
        raise GpunodeError(f"the initramfs generation after this run's package installs failed (exit "
                           f"{result.exit_code}):\n{result.tail()}", fix=FIX, step=before or "initramfs")
