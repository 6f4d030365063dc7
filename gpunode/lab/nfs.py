"""The lab's NFS server: nfs-ganesha (VFS) + rpcbind in their own network namespace on the lab bridge.

Both daemons run from this machine's filesystem inside `ip netns exec` plus a private mount namespace with
its own tmpfs on /run, so they never meet a system rpcbind or ganesha (sockets, pid files, D-Bus).
Everything else lives in `<lab dir>/nfs/`: config, logs, pids, NFSv4 recovery state and the exported folder.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from gpunode.lab.network import LabNetwork, sh

NFS_INDEX = 240             # address index on the lab bridge: .250 in a /24, far from hosts (.11 up)
NFS_NAME = "nfs"            # namespace gn-<tag>-nfs
EXPORT = "/export"          # the path clients mount, NFSv3 and v4 alike (mount_path_pseudo)
PORTS = {"nfs": 2049, "mountd": 20048, "nlockmgr": 32803}
DAEMONS = {"rpcbind": "rpcbind", "ganesha": "ganesha.nfsd"}
REQUIRED = ("ganesha.nfsd", "rpcbind", "rpcinfo", "unshare")

_LAUNCH = """
set -e
mount -t tmpfs -o mode=0755 gpunode-nfs /run
mkdir -p /run/rpcbind
rpcbind -f -w </dev/null >"$1/rpcbind.log" 2>&1 &
echo $! >"$1/rpcbind.pid"
i=0
while [ ! -S /run/rpcbind.sock ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
ganesha.nfsd -F -f "$1/ganesha.conf" -L "$1/ganesha.log" -p "$1/ganesha.pidfile" -N NIV_EVENT \
  </dev/null >"$1/ganesha.out" 2>&1 &
echo $! >"$1/ganesha.pid"
"""


class LabNfsServer:
    """`up()` starts (or keeps) the server; `down()` stops it and removes its namespace and files."""

    def __init__(self, network: LabNetwork, lab_directory: Path) -> None:
        self.network = network
        self.directory = Path(lab_directory) / "nfs"
        self.export_dir = self.directory / "export"
        self.address = network.address(NFS_INDEX)
        self.netns = network.netns_name(NFS_NAME)
        self.export = EXPORT

    # ---- lifecycle -------------------------------------------------------------------------------
    def up(self, timeout: float = 20.0) -> LabNfsServer:
        """Start rpcbind and ganesha unless they already run; wait until NFS, rpcbind and mountd answer."""
        missing = [tool for tool in REQUIRED if not shutil.which(tool)]
        if missing:
            raise RuntimeError(f"the lab NFS server needs {', '.join(missing)}: "
                               "apt-get install -y nfs-ganesha nfs-ganesha-vfs rpcbind")
        if self.running():
            return self
        self.down()
        self.network.up()
        for sub in ("export", "recovery"):
            (self.directory / sub).mkdir(parents=True, exist_ok=True)
        self.export_dir.chmod(0o777)
        (self.directory / "ganesha.conf").write_text(self.config())
        self.network.attach(NFS_NAME, NFS_INDEX)
        result = subprocess.run(["ip", "netns", "exec", self.netns, "unshare", "--mount", "--propagation",
                                 "private", "sh", "-c", _LAUNCH, "lab-nfs", str(self.directory)],
                                capture_output=True, text=True, timeout=30)
        if result.returncode != 0:
            self.down()
            raise RuntimeError(f"starting the lab NFS server failed: {result.stderr.strip()}")
        try:
            self._wait(timeout)
        except RuntimeError:
            log = self.log_tail()
            self.down()
            raise RuntimeError(f"the lab NFS server did not come up in {timeout:.0f}s:\n{log}") from None
        return self

    def down(self) -> None:
        """Stop the daemons this server started, remove its namespace and files. Safe to call twice."""
        for name in DAEMONS:
            pid = self._pid(name)
            if pid:
                _stop(pid)
            (self.directory / f"{name}.pid").unlink(missing_ok=True)
        self.network.detach(NFS_NAME, NFS_INDEX)
        shutil.rmtree(self.directory, ignore_errors=True)

    def running(self) -> bool:
        return all(self._pid(name) for name in DAEMONS) and _answers(self.address, PORTS["nfs"])

    # ---- helpers ---------------------------------------------------------------------------------
    def config(self) -> str:
        """ganesha.conf: one export, NFSv3 and v4 over TCP, no grace period, state in our directory."""
        return f"""NFS_CORE_PARAM {{
    NFS_Port = {PORTS['nfs']};
    MNT_Port = {PORTS['mountd']};
    NLM_Port = {PORTS['nlockmgr']};
    Enable_RQUOTA = false;
    Enable_UDP = false;
    mount_path_pseudo = true;
    Plugins_Dir = "{_plugins_dir()}";
}}
NFSv4 {{
    Graceless = true;
    RecoveryRoot = "{self.directory / 'recovery'}";
}}
EXPORT {{
    Export_Id = 1;
    Path = "{self.export_dir}";
    Pseudo = "{EXPORT}";
    Access_Type = RW;
    Squash = No_Root_Squash;
    Protocols = 3, 4;
    Transports = TCP;
    SecType = sys;
    FSAL {{ Name = VFS; }}
}}
"""

    def log_tail(self, lines: int = 20) -> str:
        texts = []
        for name in ("ganesha.log", "ganesha.out", "rpcbind.log"):
            path = self.directory / name
            if path.exists():
                texts.append(f"== {name}\n" + "\n".join(path.read_text(errors="replace").splitlines()[-lines:]))
        return "\n".join(texts)

    def rpcinfo(self) -> str:
        """`rpcinfo -p` of the server, asked from this machine over the bridge."""
        return sh("rpcinfo", "-p", self.address).stdout

    def _pid(self, name: str) -> int | None:
        """The recorded pid of a daemon when that process still runs that program (never a reused pid)."""
        try:
            pid = int((self.directory / f"{name}.pid").read_text().strip())
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        except (OSError, ValueError):
            return None
        return pid if DAEMONS[name].startswith(comm) else None

    def _wait(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not all(self._pid(name) for name in DAEMONS):
                raise RuntimeError("a daemon exited")
            if all(_answers(self.address, port) for port in (111, *PORTS.values())):
                services = sh("rpcinfo", "-p", self.address, check=False).stdout
                if "mountd" in services and "nfs" in services:
                    return
            time.sleep(0.2)
        raise RuntimeError("timed out")


def _plugins_dir() -> str:
    """The folder holding ganesha's FSAL plugins (multiarch paths differ)."""
    for pattern in ("/usr/lib/*/ganesha", "/usr/lib64/ganesha", "/usr/lib/ganesha"):
        for folder in sorted(Path("/").glob(pattern.lstrip("/"))):
            if (folder / "libfsalvfs.so").exists():
                return str(folder)
    raise RuntimeError("ganesha's VFS plugin (libfsalvfs.so) is missing: apt-get install -y nfs-ganesha-vfs")


def _answers(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=0.5):
            return True
    except OSError:
        return False


def _stop(pid: int, grace: float = 5.0) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not Path(f"/proc/{pid}").exists() or _zombie(pid):
            return
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True
