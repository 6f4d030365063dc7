"""The initramfs hold (steps/initramfs_pause.py) on a VM with its own GRUB, across a real reboot (issue #40).

A kernel installed while the run holds initramfs generations back gets no image from its postinst, and its postinst's
zz-update-grub writes its GRUB entry without an `initrd` line (GRUB's 10_linux lists only an image that exists). The
hold's end (FLUSH) makes the image and runs that hook again. Here, on the lab's stand-in for Debian's genericcloud
image (gpunode/lab/cloud_image.py, the kernel guard's VM fixture in tests/test_vm_kernel_guard.py): the very
commands gpunode runs (StepContext.command_for's paused install, then FLUSH) install a newer cloud kernel; before
FLUSH its entry has no initrd line, after it the entry has one; a real reboot comes back on that kernel.

Opt-in (`-m vm`, slow): about 10 minutes under TCG on 2 shared cores (mkinitramfs dominates).
"""

from __future__ import annotations

import re
import shlex
import time

import pytest

from gpunode.lab.apt_sources import RETRIED_UPDATE
from gpunode.steps import Action, StepContext
from gpunode.steps.initramfs_pause import CONF, FLUSH, MARK
from tests.plan_cases import DEFAULT_OS, build_facts
from tests.test_lab_kernel_guard import KERNELS
from tests.test_vm_kernel_guard import TIMINGS, inside, reboot, vm  # noqa: F401 - `vm`: the module's fixture

pytestmark = [pytest.mark.vm, pytest.mark.slow]


def entry_of(grub_cfg: str, kernel: str) -> str:
    """The first menuentry block of grub.cfg that boots `kernel`."""
    for block in re.split(r"\n\s*menuentry ", grub_cfg):
        if f"/vmlinuz-{kernel} " in block:
            return block.split("\n}", 1)[0]
    return ""


def test_a_held_kernel_install_gets_its_image_and_grub_entry_and_boots(vm):  # noqa: F811
    kernels = inside(vm, f"{RETRIED_UPDATE} >/dev/null && {KERNELS}", timeout=600).split()
    old = inside(vm, "uname -r")
    newer = inside(vm, f"for k in {' '.join(kernels)}; do dpkg --compare-versions $k gt {old} && echo $k; done")
    new = newer.split()[-1]  # the newest: GRUB's first entry once installed
    from gpunode.inventory import Host
    ctx = StepContext(Host(name=vm.name, address=vm.address), build_facts(DEFAULT_OS, {}), conn=None,  # type: ignore[arg-type]
                      check=False)
    install = ctx.command_for(Action("kernel", command="DEBIAN_FRONTEND=noninteractive apt-get install -y -q "
                                     f"--no-install-recommends linux-image-{new}", initramfs_once=True))
    assert MARK in install and ctx.state.initramfs_held

    started = time.monotonic()
    inside(vm, f"sh -c {shlex.quote(install)} >/var/tmp/install.log 2>&1", timeout=1800)
    TIMINGS[f"held install of linux-image-{new}"] = time.monotonic() - started
    assert inside(vm, f"test ! -e /boot/initrd.img-{new} && grep -cF {shlex.quote(MARK)} {CONF}") == "1"
    held_entry = entry_of(inside(vm, "cat /boot/grub/grub.cfg"), new)
    assert held_entry and "initrd" not in held_entry, held_entry  # what the postinst's zz-update-grub wrote

    started = time.monotonic()
    inside(vm, f"sh -c {shlex.quote(FLUSH)} >/var/tmp/flush.log 2>&1", timeout=1800)
    TIMINGS["the hold's end: one image and the GRUB entry"] = time.monotonic() - started
    assert inside(vm, f"grep -c 'update-initramfs: Generating' /var/tmp/flush.log; grep -cF {shlex.quote(MARK)} "
                      f"{CONF} || true") == "1\n0"
    entry = entry_of(inside(vm, "cat /boot/grub/grub.cfg"), new)
    assert f"initrd\t/boot/initrd.img-{new}" in entry or f"initrd /boot/initrd.img-{new}" in entry, entry
    assert f"/boot/vmlinuz-{new} " in inside(vm, "grep -m1 -E '^\\s*linux\\s' /boot/grub/grub.cfg")

    TIMINGS[f"reboot from {old} into {new}, to SSH"] = reboot(vm)
    assert inside(vm, "uname -r") == new
