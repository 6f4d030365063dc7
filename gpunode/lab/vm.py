"""A lab VM: qemu under TCG with a real Debian kernel, on a tap device on the lab's bridge.

Two kinds of disk, both from a per-VM qcow2 overlay:
- the lab's VM image (`vm_image.py`), booted directly (`-kernel/-initrd`); its identity comes from a small ext4
  seed disk that `gpunode-seed.service` copies into place;
- a cloud image (a bake's result, `cloud_image.py`), booted by its own GRUB; its identity comes from a NoCloud
  seed (an ISO labelled cidata) that cloud-init reads, as on a cloud. Given `user_data`, the seed carries it
  verbatim as its user-data and the identity moves to its vendor-data, as a cloud keeps the two apart.
Either way an ed25519 host key is generated here (the controller verifies it against the VM's own known_hosts
file) with the static address and the lab's login key. Reboots are real: the guest resets and qemu boots it again
in place (no `-no-reboot`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from gpunode.distros import LAB
from gpunode.lab.network import LabNetwork, sh
from gpunode.lab.rootfs import LAB_USER
from gpunode.lab.vm_image import VmImage

QEMU = "qemu-system-x86_64"
MEMORY_MB = 1024
TOOLS = (QEMU, "qemu-img", "mmdebstrap", "mkfs.ext4", "ssh-keygen", "ssh", "ip", "genisoimage")
CLOUD_USER = LAB.CLOUD_USER  # the user cloud-init makes on the lab distro's cloud images


def vm_unavailable() -> str | None:
    """Why lab VMs cannot run here (None when they can)."""
    if os.geteuid() != 0:
        return "lab VMs need root (tap devices, the lab bridge)"
    missing = [tool for tool in TOOLS if not shutil.which(tool)]
    if missing:
        return f"missing {', '.join(missing)} (apt-get install -y qemu-system-x86 qemu-utils mmdebstrap genisoimage)"
    if not os.path.exists("/dev/net/tun"):
        return "/dev/net/tun is missing: no tap devices"
    return None


@dataclass
class VmHost:
    """One VM named `<tag>-vm<index>` at the lab address of `index`; state in `directory`."""

    name: str
    index: int
    address: str
    directory: Path
    network: LabNetwork
    image: VmImage
    client_key: Path  # the lab's private key; its .pub goes into authorized_keys
    # a cloud image's user data, as a user gives it (e.g. `gpunode user-data`); megabytes, so not in repr()
    user_data: str | None = field(default=None, repr=False)

    @classmethod
    def on_lab(cls, network: LabNetwork, lab_directory: Path, index: int, image: VmImage,
               client_key: Path, user_data: str | None = None) -> VmHost:
        name = f"{network.tag}-vm{index}"
        return cls(name=name, index=index, address=network.address(index),
                   directory=Path(lab_directory) / "vms" / name, network=network, image=image,
                   client_key=Path(client_key), user_data=user_data)

    # ---- paths and descriptions ------------------------------------------------------------------
    @property
    def tap(self) -> str:
        return tap_name(self.network.tag, self.index)

    @property
    def mac(self) -> str:
        digest = hashlib.sha256(f"{self.network.tag}/{self.index}".encode()).digest()
        return "52:54:00:" + ":".join(f"{b:02x}" for b in digest[:3])

    @property
    def user(self) -> str:
        return LAB_USER if self.image.direct_boot else CLOUD_USER

    @property
    def known_hosts_path(self) -> Path:
        return self.directory / "known_hosts"

    @property
    def console_path(self) -> Path:
        return self.directory / "console.log"

    @property
    def pidfile(self) -> Path:
        return self.directory / "qemu.pid"

    def inventory_entry(self) -> dict:
        """This host in an inventory (Ansible variable names), host key checked against its own file."""
        return {"ansible_host": self.address, "ansible_user": self.user, "ansible_become": True,
                "ansible_ssh_private_key_file": str(self.client_key), "known_hosts": str(self.known_hosts_path)}

    # ---- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        """Fresh overlay, seed disk and tap (leftovers of an earlier run removed), then boot in the background."""
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)
        self.directory.mkdir(parents=True)
        sh("qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", str(self.image.disk),
           str(self.directory / "disk.qcow2"))
        self._make_seed() if self.image.direct_boot else self._make_cloud_seed()
        self.network.up()
        sh("ip", "tuntap", "add", "dev", self.tap, "mode", "tap")
        sh("ip", "link", "set", self.tap, "master", self.network.bridge, "up")
        sh("ip", "neigh", "flush", "to", self.address, check=False)
        result = subprocess.run(self.qemu_command(), capture_output=True, text=True, timeout=60)
        if result.returncode != 0:
            self.stop()
            raise RuntimeError(f"qemu did not start: {(result.stderr or result.stdout).strip()}")

    def qemu_command(self) -> list[str]:
        boot: list[str] = []  # a cloud image boots with its own GRUB from the disk
        if self.image.direct_boot:
            append = f"root=/dev/vda rw console=ttyS0 systemd.hostname={self.name}"
            boot = ["-kernel", str(self.image.kernel), "-initrd", str(self.image.initrd), "-append", append]
        return [
            QEMU, "-accel", "tcg", "-m", str(MEMORY_MB), "-smp", "1", "-name", self.name,
            "-nodefaults", "-no-user-config", "-display", "none", *boot,
            "-drive", f"file={self.directory / 'disk.qcow2'},if=virtio,format=qcow2,cache=unsafe",
            "-drive", f"file={self.directory / 'seed.img'},if=virtio,format=raw,readonly=on",
            "-netdev", f"tap,id=lab,ifname={self.tap},script=no,downscript=no",
            "-device", f"virtio-net-pci,netdev=lab,mac={self.mac}",
            "-device", "virtio-rng-pci",
            "-serial", f"file:{self.console_path}",
            "-pidfile", str(self.pidfile), "-daemonize",
        ]

    def wait_for_ssh(self, timeout: float = 180.0) -> float:
        """Block until sshd answers with its banner; returns the seconds waited."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            if self.pid() is None:
                raise RuntimeError(f"VM {self.name} exited while booting:\n{self.console_tail()}")
            try:
                with socket.create_connection((self.address, 22), timeout=2) as sock:
                    sock.settimeout(10)
                    if sock.recv(64).startswith(b"SSH-"):
                        return time.monotonic() - started
            except OSError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"VM {self.name} ({self.address}) did not answer on port 22 in {timeout:.0f}s:\n"
                           f"{self.console_tail()}")

    def pid(self) -> int | None:
        """The qemu process of this VM, when it runs (never a reused pid of another program)."""
        try:
            pid = int(self.pidfile.read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if _is_qemu(pid) else None

    def stop(self) -> None:
        """Kill qemu, delete the tap and forget the ARP entry. Safe to call twice, or for a VM never started."""
        _stop(self.pidfile, self.tap, self.address)

    def destroy(self) -> None:
        """Stop and delete the overlay, seed disk and every other file of this VM."""
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)
        with contextlib.suppress(OSError):
            self.directory.parent.rmdir()  # `vms/`, once the last VM is gone

    # ---- inside the VM ---------------------------------------------------------------------------
    def ssh(self, command: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Run a command as root over SSH (host key verified against the VM's known_hosts)."""
        return subprocess.run(
            ["ssh", "-i", str(self.client_key), "-o", f"UserKnownHostsFile={self.known_hosts_path}",
             "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10",
             f"{self.user}@{self.address}", "sudo", "sh", "-c", shlex.quote(command)],
            capture_output=True, text=True, timeout=timeout,
        )

    def boots(self) -> int:
        """How many times the kernel has booted since start (counted on the serial console)."""
        if not self.console_path.exists():
            return 0
        return self.console_path.read_text(errors="replace").count("Linux version ")

    def console_tail(self, lines: int = 25) -> str:
        if not self.console_path.exists():
            return "(no console output)"
        return "\n".join(self.console_path.read_text(errors="replace").splitlines()[-lines:])

    # ---- internals -------------------------------------------------------------------------------
    def _host_key(self, folder: Path) -> tuple[str, str]:
        """A new ed25519 host key (private, public) for this VM, recorded in its known_hosts file."""
        key = folder / "ssh_host_ed25519_key"
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", self.name, "-f", str(key))
        public = " ".join(key.with_suffix(".pub").read_text().split()[:2])
        self.known_hosts_path.write_text(f"{self.address} {public}\n")
        return key.read_text(), public

    def _make_cloud_seed(self) -> None:
        """A NoCloud seed (ISO labelled cidata): a new instance id, host key, login key, static address and DNS.

        The identity is the user-data, or the vendor-data when the VM has user data of its own (cloud-init
        merges the two; the user's keys win, and gpunode's user data sets none of these).
        """
        with tempfile.TemporaryDirectory(dir=self.directory) as tmp:
            folder = Path(tmp)
            private, public = self._host_key(folder)
            instance = f"{self.name}-{os.urandom(4).hex()}"
            identity = {"ssh_pwauth": False, "ssh_deletekeys": True, "ssh_genkeytypes": [],
                        "ssh_keys": {"ed25519_private": private, "ed25519_public": public},
                        "ssh_authorized_keys": [self.client_key.with_suffix(".pub").read_text().strip()],
                        # the host's resolvers, as DHCP would give them (a static address brings none)
                        "bootcmd": [["sh", "-c", 'rm -f /etc/resolv.conf && printf "nameserver %s\\n" "$@" '
                                     "> /etc/resolv.conf", "resolv", *host_nameservers()]]}
            network = {"version": 1, "config": [{
                "type": "physical", "name": "lab0", "mac_address": self.mac,
                "subnets": [{"type": "static", "address": f"{self.address}/{self.network.subnet.prefixlen}",
                             "gateway": self.network.gateway}]}]}
            (folder / "meta-data").write_text(yaml.safe_dump({"instance-id": instance, "local-hostname": self.name}))
            config = "#cloud-config\n" + yaml.safe_dump(identity)
            files = ["user-data", "meta-data", "network-config"]
            if self.user_data is None:
                (folder / "user-data").write_text(config)
            else:
                (folder / "user-data").write_text(self.user_data)
                (folder / "vendor-data").write_text(config)
                files.append("vendor-data")
            (folder / "network-config").write_text(yaml.safe_dump(network))
            sh("genisoimage", "-quiet", "-output", str(self.directory / "seed.img"), "-volid", "cidata", "-joliet",
               "-rock", *(str(folder / name) for name in files))

    def _make_seed(self) -> None:
        """The seed disk: files that `gpunode-seed.service` copies over / at boot, and our known_hosts."""
        with tempfile.TemporaryDirectory(dir=self.directory) as tmp:
            files = Path(tmp) / "files"
            ssh_dir = files / "etc" / "ssh"
            network_dir = files / "etc" / "systemd" / "network"
            for folder in (ssh_dir, network_dir):
                folder.mkdir(parents=True, mode=0o755)
            self._host_key(ssh_dir)
            prefix = self.network.subnet.prefixlen
            (network_dir / "10-gpunode-lab.network").write_text(
                f"[Match]\nMACAddress={self.mac}\n\n[Network]\nAddress={self.address}/{prefix}\n"
                f"Gateway={self.network.gateway}\nLinkLocalAddressing=no\nIPv6AcceptRA=no\n")
            (files / "etc" / "hostname").write_text(self.name + "\n")
            (files / "etc" / "hosts").write_text(f"127.0.0.1 localhost\n{self.address} {self.name}\n")
            shutil.copyfile("/etc/resolv.conf", files / "etc" / "resolv.conf")
            authorized = self.client_key.with_suffix(".pub").read_text().strip() + "\n"
            for home, mode in ((files / "root", 0o700), (files / "home" / LAB_USER, 0o755)):
                (home / ".ssh").mkdir(parents=True, mode=0o700)
                home.chmod(mode)
                (home / ".ssh" / "authorized_keys").write_text(authorized)
            sh("mkfs.ext4", "-q", "-F", "-L", "gpunode-seed", "-d", tmp, str(self.directory / "seed.img"), "8M")


def host_nameservers() -> list[str]:
    """The resolvers in this machine's /etc/resolv.conf (the lab's NAT reaches them)."""
    lines = Path("/etc/resolv.conf").read_text().splitlines()
    return [line.split()[1] for line in lines if line.startswith("nameserver") and len(line.split()) > 1]


def tap_name(tag: str, index: int) -> str:
    return f"gnt{tag}{index}"[:15]


def remove_vms(network: LabNetwork, lab_directory: Path) -> None:
    """Stop and delete every VM of a lab, leftovers of a killed run included (for `Lab.down()`)."""
    for folder in sorted((Path(lab_directory) / "vms").glob(f"{network.tag}-vm*")):
        suffix = folder.name.rsplit("-vm", 1)[1]
        if not suffix.isdigit():
            continue
        index = int(suffix)
        _stop(folder / "qemu.pid", tap_name(network.tag, index), network.address(index))
        shutil.rmtree(folder, ignore_errors=True)
    with contextlib.suppress(OSError):
        (Path(lab_directory) / "vms").rmdir()


def _stop(pidfile: Path, tap: str, address: str, grace: float = 5.0) -> None:
    """Kill the qemu of `pidfile` (politely, then firmly), delete the tap, flush the ARP entry."""
    try:
        pid = int(pidfile.read_text().strip())
    except (OSError, ValueError):
        pid = 0
    if pid and _is_qemu(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while _is_qemu(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _is_qemu(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            while _is_qemu(pid) and time.monotonic() < deadline + grace:
                time.sleep(0.1)
    pidfile.unlink(missing_ok=True)
    sh("ip", "link", "del", tap, check=False)
    sh("ip", "neigh", "flush", "to", address, check=False)


def _is_qemu(pid: int) -> bool:
    """True while `pid` is a live (not zombie) qemu process."""
    try:
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return QEMU.startswith(comm) and state != "Z"
