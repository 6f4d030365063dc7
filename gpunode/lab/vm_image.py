"""Build (once) and cache the Debian 12 disk that lab VMs boot: a real kernel, for what containers cannot do.

An mmdebstrap tree with linux-image-cloud-amd64, sshd, sudo, python3 and nfs-common becomes an ext4 image
(`mkfs.ext4 -d`), converted to qcow2; the kernel and initrd are kept beside it for direct boot. Nothing in the
image is specific to one VM: each VM's identity (host key, address, login keys) comes from its seed disk,
which `gpunode-seed.service` copies into place at every boot before the network and sshd start.
"""

from __future__ import annotations

import fcntl
import hashlib
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from gpunode.lab.apt_sources import LAB_COMPONENTS, host_apt_options, host_mirrors
from gpunode.lab.rootfs import LAB_USER, SUITE, cache_dir

PACKAGES = (
    "linux-image-cloud-amd64", "systemd-sysv", "dbus", "udev", "kmod", "openssh-server", "sudo", "iproute2",
    "ca-certificates", "python3", "nfs-common",
)
DISK_SIZE = "4G"          # sparse: the qcow2 holds only what is used (room for headers and the like)
SEED_DEVICE = "/dev/vdb"  # the second virtio disk

SEED_SCRIPT = f"""#!/bin/sh
# Copy this VM's identity from its seed disk (written by gpunode.lab.vm before boot) into place.
set -eu
dir=/run/gpunode-seed
mkdir -p "$dir"
mount -o ro {SEED_DEVICE} "$dir"
tar -C "$dir/files" -cf - . | tar -C / --no-overwrite-dir -xf -
umount "$dir"
chown -R {LAB_USER}:{LAB_USER} /home/{LAB_USER}/.ssh
"""

SEED_UNIT = """[Unit]
Description=gpunode lab VM identity from the seed disk (host key, address, login keys)
DefaultDependencies=no
Requires=dev-vdb.device
After=dev-vdb.device systemd-remount-fs.service
Before=sysinit.target network-pre.target systemd-networkd.service ssh.service
Wants=network-pre.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/gpunode-seed

[Install]
WantedBy=sysinit.target
"""

# Timers that would take the apt lock or the only CPU minutes into a test under emulation.
QUIET_TIMERS = ("apt-daily.timer", "apt-daily-upgrade.timer", "man-db.timer", "e2scrub_all.timer",
                "fstrim.timer", "dpkg-db-backup.timer")
# Units that cost boot time under emulation and do nothing here (systemd-networkd configures the network).
MASKED = ("getty.target", "networking.service", "e2scrub_reap.service")

CUSTOMIZE = (
    f"useradd --create-home --shell /bin/bash --groups sudo {LAB_USER}",
    f"echo '{LAB_USER} ALL=(ALL) NOPASSWD:ALL' > /etc/sudoers.d/{LAB_USER} && chmod 0440 /etc/sudoers.d/{LAB_USER}",
    "rm -f /etc/ssh/ssh_host_*",
    "printf 'PasswordAuthentication no\\nUseDNS no\\nPermitRootLogin prohibit-password\\n'"
    " > /etc/ssh/sshd_config.d/lab.conf",
    "printf '/dev/vda / ext4 rw,errors=remount-ro 0 1\\n' > /etc/fstab",
    "chmod 0755 /usr/local/sbin/gpunode-seed",
    "systemctl enable gpunode-seed.service systemd-networkd.service >/dev/null 2>&1",
    f"systemctl disable {' '.join(QUIET_TIMERS)} >/dev/null 2>&1 || true",
    f"systemctl mask {' '.join(MASKED)} >/dev/null 2>&1",
    ": > /etc/machine-id",
)


@dataclass(frozen=True)
class VmImage:
    """A base disk (qcow2) and, for the lab's own image, the kernel + initrd to boot it with directly.

    Without a kernel the disk boots with its own boot loader (a cloud image, configured by cloud-init).
    """

    disk: Path
    kernel: Path | None = None
    initrd: Path | None = None

    @property
    def direct_boot(self) -> bool:
        return self.kernel is not None

    @property
    def kernel_release(self) -> str:
        return self.kernel.name.removeprefix("vmlinuz-") if self.kernel else ""


def mmdebstrap_recipe(packages: tuple[str, ...], files: dict[str, str], customize: tuple[str, ...],
                      mirror: str | None, extra_key: str) -> tuple[list[str], str]:
    """mmdebstrap arguments for a bootable Debian tree (the host's mirrors and apt options) and their cache key.

    `files` (path in the tree -> content) are written before the `customize` commands run in the chroot.
    """
    sources = host_mirrors(override=mirror).sources_list(SUITE)
    apt_options = host_apt_options()
    hooks = [f"mkdir -p \"$1/{Path(path).parent.as_posix().lstrip('/')}\" && printf %s {shlex.quote(content)} "
             f"> \"$1{path}\"" for path, content in files.items()]
    hooks += [f"chroot \"$1\" sh -c {shlex.quote(cmd)}" for cmd in customize]
    hooks.append(f"printf %s {shlex.quote(sources)} > \"$1/etc/apt/sources.list\"")
    if apt_options:
        quoted = " ".join(shlex.quote(o) for o in apt_options)
        hooks.append(f"printf '%s\\n' {quoted} > \"$1/etc/apt/apt.conf.d/99lab-mirror\"")
    args = [
        "mmdebstrap", "--variant=important", "--mode=root", f"--components={','.join(LAB_COMPONENTS)}",
        f"--include={','.join(packages)}", "--skip=cleanup/apt/lists",  # apt-cache works without an update
        *(f"--aptopt={opt}" for opt in apt_options),
        *(f"--customize-hook={hook}" for hook in hooks),
    ]
    key = hashlib.sha256("\n".join([*args, sources, extra_key]).encode()).hexdigest()[:12]
    return [*args, SUITE, "{target}", sources], key


def _recipe(mirror: str | None) -> tuple[list[str], str]:
    files = {"/usr/local/sbin/gpunode-seed": SEED_SCRIPT, "/etc/systemd/system/gpunode-seed.service": SEED_UNIT}
    return mmdebstrap_recipe(PACKAGES, files, CUSTOMIZE, mirror, DISK_SIZE)


def ensure_vm_image(mirror: str | None = None, log=sys.stderr) -> VmImage:
    """Return the cached VM image, building it (a few minutes, once) when missing."""
    args, key = _recipe(mirror)
    target = cache_dir() / f"vm-{SUITE}-{key}"
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".vm-{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one builder at a time; the others then find it built
        if not (target / "base.qcow2").exists():
            _build(args, target, log)
    return VmImage(disk=target / "base.qcow2", kernel=next(target.glob("vmlinuz-*")),
                   initrd=next(target.glob("initrd.img-*")))


def _build(args: list[str], target: Path, log) -> None:
    missing = [t for t in ("mmdebstrap", "mkfs.ext4", "qemu-img") if not shutil.which(t)]
    if missing:
        raise RuntimeError(f"building the VM image needs {', '.join(missing)}: "
                           "apt-get install -y mmdebstrap e2fsprogs qemu-utils")
    building = target.with_name(target.name + ".building")
    shutil.rmtree(building, ignore_errors=True)
    building.mkdir(parents=True)
    tree, raw = building / "tree", building / "disk.raw"
    print(f"lab: building the Debian {SUITE} VM image in {target} (a few minutes, once)", file=log, flush=True)
    try:
        _run([tree.as_posix() if a == "{target}" else a for a in args], "mmdebstrap")
        for pattern in ("vmlinuz-*", "initrd.img-*"):
            found = sorted((tree / "boot").glob(pattern))
            if not found:
                raise RuntimeError(f"the VM tree has no /boot/{pattern}: did linux-image-cloud-amd64 install?")
            shutil.copyfile(found[-1], building / found[-1].name)
        _run(["mkfs.ext4", "-q", "-F", "-L", "gpunode-root", "-d", str(tree), str(raw), DISK_SIZE], "mkfs.ext4")
        _run(["qemu-img", "convert", "-O", "qcow2", str(raw), str(building / "base.qcow2")], "qemu-img convert")
        shutil.rmtree(tree)
        raw.unlink()
        building.rename(target)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise


def _run(command: list[str], what: str) -> None:
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        tail = "\n".join((result.stderr or result.stdout).splitlines()[-15:])
        raise RuntimeError(f"{what} failed (exit {result.returncode}):\n{tail}")
