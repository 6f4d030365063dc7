"""Shared by the opt-in VM suites (`pytest -m vm`): installing qemu, timings printed at the end."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.conftest import REQUIRE_LAB

VM_PACKAGES = ("qemu-system-x86", "qemu-utils", "genisoimage")


def install_vm_tools() -> str | None:
    """Install qemu (and genisoimage, for cloud-init seeds) with apt when missing; why not, or None."""
    if all(shutil.which(tool) for tool in ("qemu-system-x86_64", "qemu-img", "genisoimage")):
        return None
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return f"qemu is missing: apt-get install -y {' '.join(VM_PACKAGES)}"
    apt = ["apt-get", "-q", "-o", "DPkg::Lock::Timeout=300"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = [*apt, "install", "-y", "--no-install-recommends", *VM_PACKAGES]
    for command in (install, [*apt, "update"], install):
        result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
        if result.returncode == 0 and command is install:
            return None
    return f"installing {' '.join(VM_PACKAGES)} failed: {result.stderr.strip()[-500:]}"


def require_vms() -> None:
    """Skip (or, with GPUNODE_REQUIRE_LAB=1, fail) when lab VMs cannot run here."""
    from gpunode.lab.vm import vm_unavailable

    reason = install_vm_tools() or vm_unavailable()
    if reason:
        (pytest.fail if REQUIRE_LAB else pytest.skip)(f"lab VM unavailable: {reason}")


def timings_reporter(request, timings: dict[str, float], prefix: str):
    """A finalizer that prints the measured times on the terminal (outside output capture)."""
    def report() -> None:
        plugins = request.config.pluginmanager
        reporter, capture = plugins.get_plugin("terminalreporter"), plugins.get_plugin("capturemanager")
        if reporter and capture:
            with capture.global_and_fixture_disabled():
                reporter.write_line("")
                for what, seconds in timings.items():
                    reporter.write_line(f"{prefix}: {what}: {seconds:.1f}s")
    return report
