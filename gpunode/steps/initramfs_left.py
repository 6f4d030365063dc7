"""gpunode's initramfs pause (steps/initramfs_pause.py) left by a run cut short: removed by the kernel and driver
steps before anything else, and the image updated."""

from __future__ import annotations

from gpunode.steps.base import Action
from gpunode.steps.initramfs_pause import CONF as PAUSE_CONF
from gpunode.steps.initramfs_pause import FLUSH
from gpunode.steps.initramfs_pause import MARK as PAUSE_MARK


def left_initramfs_pause(probed: str, held: bool = False) -> list[Action]:
    """gpunode's pause left by a run cut short (its marked line, `probed`) ended as a run ends it (removed, then
    an image for each kernel left without one, else the newest image updated): while the line is there, no
    package update regenerates the initramfs. `held`: the pause is this run's own (an earlier step's install holds
    it for the run to end: steps/initramfs_hold.py), not one left behind."""
    if held or PAUSE_MARK not in probed:
        return []
    return [Action(f"remove gpunode's pause of initramfs updates from {PAUSE_CONF} and update the initramfs",
                   "left by a run that was cut short during a package install: while it is there, no package "
                   "update regenerates the initramfs", FLUSH, timeout=900,
                   fix=f"remove the line ending in '{PAUSE_MARK}' from {PAUSE_CONF} by hand, then run "
                   "update-initramfs -u")]
