"""A local stand-in for Debian's genericcloud image: the base disk of `build-image --builder qemu` in the lab.

Like the distro's genericcloud qcow2 it has one MBR partition, GRUB in the boot sector, linux-image-cloud-amd64,
cloud-init (NoCloud seeds; it creates the distro's cloud user with passwordless sudo), ifupdown with DHCP, growpart,
no SSH host keys and an empty machine id. Nothing in it knows about gpunode or the lab.

Built from the host's apt sources with mmdebstrap (no download from the distro's cloud image site, which is not
reachable here), then booted once under qemu with a direct kernel to run `grub-install` on its own disk, so no
loop device is needed; that boot removes its own traces. Cached like the lab's other images.
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import sys
from pathlib import Path

from gpunode.distros import LAB
from gpunode.lab.rootfs import SUITE, cache_dir
from gpunode.lab.vm import QEMU
from gpunode.lab.vm_image import _run, mmdebstrap_recipe

IMAGE_NAME = LAB.LAB_CLOUD_IMAGE
PACKAGES = (
    "linux-image-cloud-amd64", "grub-pc", "cloud-init", "cloud-guest-utils", "openssh-server", "sudo", "ifupdown",
    "isc-dhcp-client", "systemd-sysv", "dbus", "udev", "kmod", "iproute2", "netbase", "ca-certificates", "python3",
)
ROOT_LABEL = "gpunode-root"
ROOT_SIZE = "3G"           # the partition; a build grows the disk and cloud-init's growpart the partition
PARTITION_START = 1 << 20  # 1 MiB: room for GRUB's core image after the MBR
DONE_MARK = "gpunode-install-grub: done"

# Boot messages on the serial console (the lab's VMs have no display): GRUB's, the kernel's, systemd's.
GRUB_DEFAULTS = """GRUB_TIMEOUT=0
GRUB_TERMINAL="serial console"
GRUB_SERIAL_COMMAND="serial --speed=115200"
GRUB_CMDLINE_LINUX="console=tty0 console=ttyS0,115200"
GRUB_CMDLINE_LINUX_DEFAULT=""
GRUB_DISABLE_OS_PROBER=true
"""
CLOUD_CFG = """# The lab's seeds are NoCloud (a cidata disk, or the SMBIOS serial Packer's qemu builder sets)
datasource_list: [NoCloud, None]
manage_etc_hosts: true
locale: C.UTF-8
"""
INSTALL_GRUB = f"""#!/bin/sh
# First boot of the image build only: GRUB into this disk's boot sector, then remove every trace of this boot.
set -eu
echo 'grub-pc grub-pc/install_devices multiselect /dev/vda' | debconf-set-selections
grub-install --target=i386-pc /dev/vda
update-grub
rm -f /etc/systemd/system/gpunode-install-grub.target /etc/systemd/system/gpunode-install-grub.service
rm -rf /var/log/journal/* /var/lib/systemd/random-seed
: > /etc/machine-id
rm -f "$0"
sync
echo '{DONE_MARK}' > /dev/ttyS0
systemctl --no-block poweroff
"""
INSTALL_GRUB_UNITS = {
    "/etc/systemd/system/gpunode-install-grub.target": (
        "[Unit]\nDescription=Install GRUB (image build)\nRequires=sysinit.target gpunode-install-grub.service\n"
        "After=sysinit.target gpunode-install-grub.service\nAllowIsolate=yes\n"),
    "/etc/systemd/system/gpunode-install-grub.service": (
        "[Unit]\nDescription=Install GRUB on /dev/vda (image build)\nAfter=local-fs.target\n"
        "FailureAction=poweroff\n\n[Service]\nType=oneshot\nExecStart=/usr/local/sbin/gpunode-install-grub\n"
        "StandardOutput=journal+console\nStandardError=journal+console\n"),
}
CUSTOMIZE = (
    f"printf 'LABEL={ROOT_LABEL} / ext4 rw,discard,errors=remount-ro 0 1\\n' > /etc/fstab",
    "chmod 0755 /usr/local/sbin/gpunode-install-grub",
    "rm -f /etc/ssh/ssh_host_*",
    # under emulation the first apt-daily run would hold the apt lock for minutes of a test
    "systemctl disable apt-daily.timer apt-daily-upgrade.timer >/dev/null 2>&1 || true",
    "printf 'auto lo\\niface lo inet loopback\\n\\nsource /etc/network/interfaces.d/*\\n' > /etc/network/interfaces",
    ": > /etc/machine-id",
)


def _recipe(mirror: str | None) -> tuple[list[str], str]:
    files = {"/etc/default/grub.d/50-gpunode-lab.cfg": GRUB_DEFAULTS,
             "/etc/cloud/cloud.cfg.d/50-gpunode-lab.cfg": CLOUD_CFG,
             "/usr/local/sbin/gpunode-install-grub": INSTALL_GRUB, **INSTALL_GRUB_UNITS}
    return mmdebstrap_recipe(PACKAGES, files, CUSTOMIZE, mirror, f"cloud {ROOT_SIZE} {PARTITION_START}")


def ensure_cloud_image(mirror: str | None = None, log=sys.stderr) -> Path:
    """The cached base disk (qcow2), built (several minutes, once) when missing."""
    args, key = _recipe(mirror)
    target = cache_dir() / f"cloud-{SUITE}-{key}"
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".cloud-{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / IMAGE_NAME).exists():
            _build(args, target, log)
    return target / IMAGE_NAME


def _build(args: list[str], target: Path, log) -> None:
    missing = [t for t in ("mmdebstrap", "mkfs.ext4", "qemu-img", QEMU) if not shutil.which(t)]
    if missing:
        raise RuntimeError(f"building the cloud base image needs {', '.join(missing)}: "
                           "apt-get install -y mmdebstrap e2fsprogs qemu-utils qemu-system-x86")
    building = target.with_name(target.name + ".building")
    shutil.rmtree(building, ignore_errors=True)
    building.mkdir(parents=True)
    tree, root, disk = building / "tree", building / "root.raw", building / "disk.raw"
    print(f"lab: building a Debian {SUITE} cloud base image in {target} (several minutes, once)", file=log,
          flush=True)
    try:
        _run([tree.as_posix() if a == "{target}" else a for a in args], "mmdebstrap")
        kernel = sorted((tree / "boot").glob("vmlinuz-*"))[-1]
        initrd = sorted((tree / "boot").glob("initrd.img-*"))[-1]
        shutil.copyfile(kernel, building / "vmlinuz")
        shutil.copyfile(initrd, building / "initrd.img")
        _run(["mkfs.ext4", "-q", "-F", "-L", ROOT_LABEL, "-d", str(tree), str(root), ROOT_SIZE], "mkfs.ext4")
        shutil.rmtree(tree)
        write_partitioned_disk(root, disk)
        root.unlink()
        install_grub(disk, building / "vmlinuz", building / "initrd.img", building / "install-grub.log")
        _run(["qemu-img", "convert", "-O", "qcow2", str(disk), str(building / IMAGE_NAME)], "qemu-img convert")
        for leftover in (disk, building / "vmlinuz", building / "initrd.img"):
            leftover.unlink()
        building.rename(target)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise


def mbr(partition_start: int, partition_size: int, sector: int = 512) -> bytes:
    """A DOS partition table with one bootable Linux partition (CHS fields say "use LBA")."""
    first, count = partition_start // sector, partition_size // sector
    entry = bytes([0x80, 0xFE, 0xFF, 0xFF, 0x83, 0xFE, 0xFF, 0xFF]) + first.to_bytes(4, "little") + \
        count.to_bytes(4, "little")
    return bytes(440) + b"gpun" + bytes(2) + entry + bytes(48) + b"\x55\xaa"


def write_partitioned_disk(root: Path, disk: Path, chunk: int = 1 << 20) -> None:
    """`disk`: an MBR, then the filesystem image `root` as its partition at PARTITION_START (sparse)."""
    size = root.stat().st_size
    with open(root, "rb") as source, open(disk, "wb") as target:
        target.truncate(PARTITION_START + size)
        target.write(mbr(PARTITION_START, size))
        target.seek(PARTITION_START)
        while block := source.read(chunk):
            if block.count(0) == len(block):
                target.seek(len(block), 1)
            else:
                target.write(block)


def install_grub(disk: Path, kernel: Path, initrd: Path, console: Path, timeout: float = 900) -> None:
    """Boot the disk once with its own kernel into gpunode-install-grub.target; it powers off when done."""
    append = (f"root=LABEL={ROOT_LABEL} rw console=ttyS0 systemd.unit=gpunode-install-grub.target "
              "cloud-init=disabled")
    command = [QEMU, "-accel", "tcg", "-m", "1024", "-nodefaults", "-no-user-config", "-display", "none",
               "-no-reboot", "-kernel", str(kernel), "-initrd", str(initrd), "-append", append,
               "-drive", f"file={disk},if=virtio,format=raw,cache=unsafe", "-serial", f"file:{console}"]
    try:
        subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"installing GRUB did not finish in {timeout:.0f}s; console: {console}") from None
    output = console.read_text(errors="replace") if console.exists() else ""
    if DONE_MARK not in output:
        tail = "\n".join(output.splitlines()[-25:])
        raise RuntimeError(f"installing GRUB in the cloud base image failed; console:\n{tail}")
