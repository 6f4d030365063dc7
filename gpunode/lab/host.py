"""One lab host: an overlay on the cached rootfs, booted with systemd-nspawn in its own network namespace."""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from gpunode.lab import cgroup
from gpunode.lab.network import sh
from gpunode.lab.rootfs import LAB_USER, SUITE

NSPAWN_ENV = {"SYSTEMD_NSPAWN_UNIFIED_HIERARCHY": "1", "SYSTEMD_SECCOMP": "0"}
REBOOT_EXIT_CODE = 133  # systemd-nspawn exits with this when the container asks for a reboot


@dataclass
class LabHost:
    """A running (or stopped) lab host; serialisable into the lab's state file."""

    name: str
    index: int
    address: str
    directory: str
    netns_path: str
    supervisor_pid: int = 0
    suite: str = SUITE            # the suite its rootfs was built from
    layers: str = ""              # extra read-only layers above the rootfs (overlay lowerdir order, ':'-joined)

    @property
    def root(self) -> Path:
        return Path(self.directory) / "merged"

    def to_dict(self) -> dict:
        return asdict(self)

    # ---- lifecycle -------------------------------------------------------------------------------
    def prepare(self, rootfs: Path, client_pubkey: str) -> str:
        """Mount the overlay and write per-host identity; returns the host's ed25519 public key line."""
        base = Path(self.directory)
        for sub in ("upper", "work", "merged", "docker"):
            (base / sub).mkdir(parents=True, exist_ok=True)
        if not os.path.ismount(self.root):
            lower = ":".join([*filter(None, self.layers.split(":")), str(rootfs)])
            sh("mount", "-t", "overlay", "overlay", "-o",
               f"lowerdir={lower},upperdir={base / 'upper'},workdir={base / 'work'}", str(self.root))
        root = self.root
        (root / "etc/hostname").write_text(self.name + "\n")
        (root / "etc/hosts").write_text(f"127.0.0.1 localhost\n{self.address} {self.name}\n")
        shutil.copyfile("/etc/resolv.conf", root / "etc/resolv.conf")
        # Tests and the bench open many connections at once; sshd's default MaxStartups (10:30:100) drops
        # unauthenticated connections beyond 10 at random, which looked like a flaky lab.
        (root / "etc/ssh/sshd_config.d/lab-limits.conf").write_text("MaxStartups 200:30:400\n")
        key = root / "etc/ssh/ssh_host_ed25519_key"
        if not key.exists():
            sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", self.name, "-f", str(key))
        uid, gid = _passwd_ids(root, LAB_USER)
        for home, owner in ((root / "root", (0, 0)), (root / "home" / LAB_USER, (uid, gid))):
            ssh_dir = home / ".ssh"
            ssh_dir.mkdir(mode=0o700, exist_ok=True)
            (ssh_dir / "authorized_keys").write_text(client_pubkey.strip() + "\n")
            for path in (ssh_dir, ssh_dir / "authorized_keys"):
                os.chown(path, *owner)
            (ssh_dir / "authorized_keys").chmod(0o600)
        return " ".join(key.with_suffix(".pub").read_text().split()[:2])

    def boot(self, log_path: Path) -> None:
        """Start the container under a small supervisor that restarts it when it reboots itself."""
        nspawn = [
            "systemd-nspawn", "--boot", "--register=no", "--keep-unit", "--quiet", "--console=passive",
            f"--machine={self.name}", f"--directory={self.root}",
            f"--network-namespace-path={self.netns_path}", "--capability=all",
            f"--bind={Path(self.directory) / 'docker'}:/var/lib/docker",
        ]
        loop = cgroup.join_command(self.name) + (
            f"while :; do {shlex.join(nspawn)}; rc=$?; "
            f"[ $rc -eq {REBOOT_EXIT_CODE} ] || exit $rc; echo '-- rebooting --'; done"
        )
        log = open(log_path, "ab")  # noqa: SIM115 - handed to the child process
        process = subprocess.Popen(
            ["bash", "-c", loop], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            env={**os.environ, **NSPAWN_ENV}, start_new_session=True,
        )
        log.close()
        self.supervisor_pid = process.pid

    def cpu_seconds(self) -> float | None:
        """CPU seconds the host's processes used so far (its own cgroup, lab/cgroup.py), or None."""
        return cgroup.cpu_seconds(self.name)

    def wait_for_ssh(self, timeout: float = 30.0) -> None:
        """Block until sshd answers with its banner and logins are allowed (while the host boots, /run/nologin
        makes PAM refuse every user but root: sshd then hangs up during authentication)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with socket.create_connection((self.address, 22), timeout=1) as sock:
                    sock.settimeout(2)
                    init = self.init_pid()
                    booting = init is not None and Path(f"/proc/{init}/root/run/nologin").exists()
                    if sock.recv(64).startswith(b"SSH-") and not booting:
                        return
            except OSError:
                pass
            if self.supervisor_pid and not _alive(self.supervisor_pid):
                raise RuntimeError(f"lab host {self.name} exited while booting; see {self.directory}/console.log")
            time.sleep(0.1)
        raise RuntimeError(f"lab host {self.name} ({self.address}) did not answer on port 22 in {timeout:.0f}s")

    def init_pid(self) -> int | None:
        """PID (in our namespace) of the container's systemd, or None when it is not running."""
        for nspawn in _children(self.supervisor_pid):
            for child in _children(nspawn):
                return child
        return None

    def run_inside(self, command: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Run a shell command inside the container from outside (for tests and fault injection)."""
        pid = self.init_pid()
        if pid is None:
            raise RuntimeError(f"lab host {self.name} is not running")
        return subprocess.run(
            ["nsenter", "-t", str(pid), "-m", "-u", "-i", "-n", "-p", "--", "sh", "-c", command],
            capture_output=True, text=True, timeout=timeout,
        )

    def stop(self) -> None:
        """Stop the container (politely, then firmly) and unmount its overlay."""
        supervisor = self.supervisor_pid
        if supervisor and _alive(supervisor):
            nspawns = _children(supervisor)
            _signal(supervisor, signal.SIGKILL)  # no restart loop from here on
            for pid in nspawns:
                _signal(pid, signal.SIGTERM)
            deadline = time.monotonic() + 5
            while any(_alive(p) for p in nspawns) and time.monotonic() < deadline:
                time.sleep(0.05)
            for pid in nspawns:
                for child in _children(pid):
                    _signal(child, signal.SIGKILL)
                _signal(pid, signal.SIGKILL)
        self.supervisor_pid = 0
        cgroup.remove(self.name)
        if os.path.ismount(self.root) and sh("umount", str(self.root), check=False).returncode != 0:
            sh("umount", "-l", str(self.root), check=False)

    def destroy(self) -> None:
        """Stop and delete all of the host's state."""
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)


def _passwd_ids(root: Path, user: str) -> tuple[int, int]:
    for line in (root / "etc/passwd").read_text().splitlines():
        fields = line.split(":")
        if fields[0] == user:
            return int(fields[2]), int(fields[3])
    raise RuntimeError(f"user {user} missing from the lab rootfs")


def _children(pid: int) -> list[int]:
    try:
        found: list[int] = []
        for task in Path(f"/proc/{pid}/task").iterdir():
            found += [int(c) for c in (task / "children").read_text().split()]
        return found
    except (OSError, ValueError):
        return []


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)
