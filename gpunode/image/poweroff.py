"""The end of a qemu build: the finalize playbook powered the VM off; wait until qemu has exited.

Packer's `shutdown_command` would need a new SSH login, which fails once image_cleanup removed the SSH host keys and
the build key, and after a reboot Packer's own connection is gone. So the qemu template has no shutdown command
(Packer then only stops a VM that is still running) and the last finalize step powers the VM off on gpunode's
connection: reboots during the build work like everywhere else.
"""

from __future__ import annotations

import socket
import time

from gpunode.errors import GpunodeError
from gpunode.inventory import Host


def wait_until_powered_off(host: Host, timeout: float = 300.0) -> float:
    """Wait until the VM's forwarded SSH port refuses connections (qemu has exited); the seconds it took."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if not _accepts_connections(host.address, host.port):
            return time.monotonic() - started
        time.sleep(1)
    raise GpunodeError(f"the build VM did not power off within {timeout:.0f}s", host=host.name, step="power off",
                       fix="read <build>/console.log for what the shutdown waited on")


def _accepts_connections(address: str, port: int) -> bool:
    """qemu's user network accepts on the forwarded port for as long as the qemu process lives."""
    try:
        with socket.create_connection((address, port), timeout=5):
            return True
    except ConnectionRefusedError:
        return False
    except OSError:
        return True  # a timeout or a reset: something still answers
