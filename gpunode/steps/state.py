"""What the steps of one host's run tell the steps after them: owned by the host's run, typed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class HostState:
    """Passed from step to step on one host during one run (and reset where a reboot makes it moot)."""

    reboot_required: bool = False          # a step's change needs a reboot to take effect
    reboot_reasons: list[str] = field(default_factory=list)  # why, one line per change, for the reboot step
    target_kernel: str = ""                # the kernel modules must be built for (a newly installed one)
    target_kernel_unknown: bool = False    # check mode: a new kernel may be installed, which one is known only then
    installing: list[str] = field(default_factory=list)  # check mode: packages earlier steps would install
    daemon_reload_pending: bool = False    # a systemd unit or drop-in was written: reload before acting on units
    package_sources_changed: bool = False  # a package source or keyring was written: refresh the lists
    apt_lists_refreshed: bool = False      # the apt lists were refreshed in this run since the last source change
    initramfs_held: bool = False           # an install left initramfs updates paused: one generation ends it
    package_manager_repaired: bool = False  # an interrupted dpkg/rpm transaction was already finished
    docker_left_out: bool = False          # the docker step installed no engine (install: no, or a Kubernetes node)

    @classmethod
    def of(cls, values: dict[str, Any]) -> HostState:
        """From a plain mapping (test cases); unknown names are an error, not silently dropped."""
        return cls(**values)

    def rebooted(self) -> None:
        """The host came back from a reboot: what the reboot was for is done."""
        self.reboot_required = False
        self.reboot_reasons = []
