"""The lab: start and stop a set of real local hosts, and write an inventory for them."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

from gpunode.lab.host import LabHost
from gpunode.lab.network import LabNetwork, sh
from gpunode.lab.nfs import LabNfsServer
from gpunode.lab.rootfs import LAB_USER, SUITE, ensure_rootfs, suite_name
from gpunode.lab.vm import remove_vms

DEFAULT_TAG = "demo"
DEFAULT_SUBNET = "10.231.1.0/24"


def lab_root() -> Path:
    return Path(os.environ.get("GPUNODE_LAB_DIR", "/var/lib/gpunode-lab"))


class Lab:
    """Hosts named `<tag>-h<N>` on their own bridge; all state lives in `<lab_root>/<tag>/`."""

    def __init__(self, tag: str = DEFAULT_TAG, subnet: str = DEFAULT_SUBNET, mirror: str | None = None) -> None:
        if not tag.isalnum() or len(tag) > 6:
            raise ValueError(f"lab tag must be 1-6 letters or digits, got {tag!r}")
        self.tag = tag
        self.mirror = mirror
        self.network = LabNetwork(tag, subnet)
        self.directory = lab_root() / tag
        self.hosts: dict[str, LabHost] = {}
        self._load_state()

    # ---- paths -----------------------------------------------------------------------------------
    @property
    def key_path(self) -> Path:
        return self.directory / "id_ed25519"

    @property
    def known_hosts_path(self) -> Path:
        return self.directory / "known_hosts"

    @property
    def inventory_path(self) -> Path:
        return self.directory / "inventory.yml"

    @property
    def state_path(self) -> Path:
        return self.directory / "state.json"

    # ---- lifecycle -------------------------------------------------------------------------------
    def up(self, count: int, log=sys.stderr, suite: str = SUITE) -> list[LabHost]:
        """Ensure hosts h1..h<count> are running (Debian `suite`); returns them. Extra running hosts are left alone."""
        _require_root_tools()
        self.network.check_subnet_free()  # refused before the rootfs (a minute) and before any file of this lab
        with self._locked():
            rootfs, pubkey = self._ready(log, suite)
            started = []
            for index in range(1, count + 1):
                name = f"{self.tag}-h{index}"
                host = self.hosts.get(name)
                if host and host.init_pid():
                    continue
                started.append(self._start(name, index, rootfs, pubkey, suite))
            self._publish(started)
        return [self.hosts[f"{self.tag}-h{i}"] for i in range(1, count + 1)]

    def add_host(self, index: int, suite: str = SUITE, layers: tuple[Path, ...] = ()) -> LabHost:
        """Start one more host (a fresh machine of Debian `suite`), e.g. for a test that must not share state;
        `layers`: read-only trees laid over the rootfs (first wins), e.g. a cached layer of installed packages."""
        with self._locked():
            rootfs, pubkey = self._ready(suite=suite)
            host = self._start(f"{self.tag}-h{index}", index, rootfs, pubkey, suite, layers)
            self._publish([host])
        return host

    def remove_host(self, name: str) -> None:
        with self._locked():
            host = self.hosts.pop(name, None)
            if host:
                host.destroy()
                self.network.detach(host.name, host.index)
            self._save_state()
            self._write_known_hosts()
            self._write_inventory()

    def down(self) -> None:
        """Stop every host, remove their disks and the network. Safe to call twice."""
        with self._locked():
            for host in list(self.hosts.values()):
                host.destroy()
                self.network.detach(host.name, host.index)
            self.hosts.clear()
            self._stop_orphans()
            LabNfsServer(self.network, self.directory).down()  # started by lab-up --nfs or the nfs_server fixture
            remove_vms(self.network, self.directory)  # qemu VMs of the opt-in VM suite
            self.network.down()
            if self.directory.exists():
                for name in ("state.json", "inventory.yml", "known_hosts"):
                    (self.directory / name).unlink(missing_ok=True)
                shutil.rmtree(self.directory / "hosts", ignore_errors=True)

    # ---- internals -------------------------------------------------------------------------------
    def _stop_orphans(self) -> None:
        """Hosts that a killed run left running but never recorded: their restart loops would otherwise start them
        again later inside the next run's network namespace of the same name (two hosts on one address)."""
        marker = f"--directory={self.directory / 'hosts'}/"
        loops: list[int] = []
        containers: list[int] = []
        for proc in Path("/proc").glob("[0-9]*"):
            try:
                command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if marker in command:
                (loops if command.startswith("bash -c ") else containers).append(int(proc.name))
        for pid in loops:  # first the loops, so that nothing restarts
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        for pid in containers:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        hosts = str(self.directory / "hosts") + "/"
        for line in Path("/proc/self/mounts").read_text().splitlines():
            target = line.split()[1] if len(line.split()) > 1 else ""
            if target.startswith(hosts):
                sh("umount", "-l", target, check=False)
        for line in sh("ip", "netns", "list", check=False).stdout.splitlines():
            name = line.split()[0] if line.split() else ""
            if name.startswith(f"gn-{self.network.tag}-"):
                sh("ip", "netns", "del", name, check=False)

    def _ready(self, log=sys.stderr, suite: str = SUITE) -> tuple[Path, str]:
        """Rootfs, state folder, client key and network in place: (rootfs, client public key)."""
        rootfs = ensure_rootfs(self.mirror, log=log, suite=suite)
        new = not self.key_path.exists() and not self.hosts
        self.directory.mkdir(parents=True, exist_ok=True)
        pubkey = self._client_key()
        _raise_inotify_limit()
        try:
            self.network.up()
        except ValueError:  # refused (the subnet is another lab's): leave nothing of a lab that never was
            if new:
                shutil.rmtree(self.directory, ignore_errors=True)
            raise
        return rootfs, pubkey

    def _publish(self, started: list[LabHost]) -> None:
        """Record state, wait until the new hosts answer, then write known_hosts and the inventory."""
        self._save_state()
        for host in started:
            host.wait_for_ssh()
        self._write_known_hosts()
        self._write_inventory()

    def _start(self, name: str, index: int, rootfs: Path, pubkey: str, suite: str = SUITE,
               layers: tuple[Path, ...] = ()) -> LabHost:
        old = self.hosts.get(name)
        if old:
            old.destroy()
        directory = self.directory / "hosts" / name
        shutil.rmtree(directory, ignore_errors=True)
        netns = self.network.attach(name, index)
        host = LabHost(name=name, index=index, address=self.network.address(index),
                       directory=str(directory), netns_path=netns, suite=suite_name(suite),
                       layers=":".join(str(layer) for layer in layers))
        host.prepare(rootfs, pubkey)
        host.boot(directory / "console.log")
        self.hosts[name] = host
        return host

    def _client_key(self) -> str:
        if not self.key_path.exists():
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"gpunode-lab-{self.tag}",
                            "-f", str(self.key_path)], check=True)
        return self.key_path.with_suffix(".pub").read_text()

    def host_public_key(self, host: LabHost) -> str:
        return " ".join((host.root / "etc/ssh/ssh_host_ed25519_key.pub").read_text().split()[:2])

    def _write_known_hosts(self) -> None:
        lines = [f"{h.address} {self.host_public_key(h)}" for h in self.hosts.values() if h.root.exists()]
        self.known_hosts_path.write_text("".join(line + "\n" for line in lines))

    def _write_inventory(self) -> None:
        hosts = {
            h.name: {"ansible_host": h.address} for h in sorted(self.hosts.values(), key=lambda h: h.index)
        }
        inventory = {
            "all": {
                "children": {
                    "lab": {
                        "hosts": hosts,
                        "vars": {
                            "ansible_user": LAB_USER,
                            "ansible_become": True,
                            "ansible_ssh_private_key_file": str(self.key_path),
                            "known_hosts": str(self.known_hosts_path),
                        },
                    }
                }
            }
        }
        header = f"# Written by gpunode's lab ({self.tag}); rewritten at each lab-up.\n"
        self.inventory_path.write_text(header + yaml.safe_dump(inventory, sort_keys=False))

    def _load_state(self) -> None:
        if self.state_path.exists():
            data = json.loads(self.state_path.read_text())
            self.hosts = {h["name"]: LabHost(**h) for h in data.get("hosts", [])}

    def _save_state(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        data = {"tag": self.tag, "subnet": str(self.network.subnet),
                "hosts": [h.to_dict() for h in self.hosts.values()]}
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2))
        tmp.replace(self.state_path)

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self.directory / ".lock", "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            yield


def _raise_inotify_limit(minimum: int = 1024) -> None:
    """Each booted host's systemd takes inotify instances; the kernel default (128) runs out at a few dozen hosts
    ("Failed to create control group inotify object: Too many open files")."""
    knob = Path("/proc/sys/fs/inotify/max_user_instances")
    if knob.exists() and int(knob.read_text()) < minimum:
        knob.write_text(f"{minimum}\n")


def _require_root_tools() -> None:
    if os.geteuid() != 0:
        raise RuntimeError("the lab needs root (network namespaces, overlay mounts, systemd-nspawn)")
    missing = [t for t in ("systemd-nspawn", "mmdebstrap", "iptables", "ssh-keygen", "nsenter") if not shutil.which(t)]
    if missing:
        raise RuntimeError(
            f"missing tools: {', '.join(missing)}; install: apt-get install -y systemd-container mmdebstrap "
            "iptables openssh-client util-linux"
        )
