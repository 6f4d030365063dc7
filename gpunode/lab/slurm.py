"""A real Slurm cluster on lab hosts: Debian 12's own slurmctld/slurmd/munge (Slurm 22.05), a controller on one
host and slurmd on the others, one munge key, and the slurm.conf gpunode writes (gpunode.schedulers.slurm_conf)."""

from __future__ import annotations

import os
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from gpunode.lab.host import LabHost
from gpunode.lab.lab import Lab
from gpunode.lab.package_layer import ensure_package_layer
from gpunode.lab.rootfs import ensure_rootfs
from gpunode.schedulers.slurm import Completed, NodeState, node_state
from gpunode.schedulers.slurm_conf import ClusterConf, lab_cgroup_conf

# Debian 12 (bookworm) main: slurmctld, slurmd, slurm-client 22.05.8-4+deb12u3 and munge (apt-cache policy on the
# lab machine, whose apt uses the Debian archive); the units the packages enable are started once configured.
PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge")
UNITS = ("slurmctld", "slurmd", "munge")
FIRST_INDEX = 200  # lab host indices of the cluster: far from the fixtures' fresh hosts (20 up)


@dataclass
class SlurmCluster:
    """A running cluster: `controller` runs slurmctld (and is where sacct reads the job completion file), `nodes`
    run slurmd; node names are the hosts' names."""

    lab: Lab
    controller: LabHost
    nodes: list[LabHost]
    conf: ClusterConf
    timings: dict[str, float] = field(default_factory=dict)

    def sh(self, host: LabHost, command: str, timeout: float = 60) -> Completed:
        """A shell command on a cluster host (run inside it, as root)."""
        result = host.run_inside(command, timeout=timeout)
        return Completed(result.returncode, result.stdout, result.stderr)

    def ctl(self, argv: list[str]) -> Completed:
        """A Slurm command on the controller (argv; the `Run` of gpunode.schedulers.slurm)."""
        return self.sh(self.controller, shlex.join(argv))

    def node(self, name: str) -> NodeState:
        return node_state(self.ctl, name)

    def write_conf(self, conf: ClusterConf) -> None:
        """Write a new slurm.conf everywhere and make every daemon reread it (`scontrol reconfigure`)."""
        self.conf = conf
        for host in (self.controller, *self.nodes):
            (host.root / "etc/slurm/slurm.conf").write_text(conf.render())
        result = self.ctl(["scontrol", "reconfigure"])
        if result.code != 0:
            raise RuntimeError(f"scontrol reconfigure failed: {result.stderr or result.stdout}")

    def restart_slurmd(self, host: LabHost) -> None:
        self._systemctl(host, "restart", "slurmd")

    def _systemctl(self, host: LabHost, verb: str, unit: str) -> None:
        result = self.sh(host, f"systemctl {verb} {unit}", timeout=90)
        if result.code != 0:
            log = self.sh(host, f"journalctl -u {unit} --no-pager -n 30; tail -n 30 /var/log/slurm/*.log").stdout
            raise RuntimeError(f"{host.name}: systemctl {verb} {unit} failed: {result.stderr}\n{log}")

    def wait_idle(self, timeout: float = 30) -> None:
        """Until every node is IDLE (registered, nothing running, not drained)."""
        deadline = time.monotonic() + timeout
        states: dict[str, str] = {}
        while time.monotonic() < deadline:
            result = self.ctl(["sinfo", "-h", "-N", "-o", "%N %T"])
            states = dict(line.split(None, 1) for line in result.stdout.splitlines() if line.strip())
            if len(states) == len(self.nodes) and all(s == "idle" for s in states.values()):
                return
            time.sleep(0.5)
        logs = "".join(f"\n--- {h.name}\n" + self.sh(h, "tail -n 15 /var/log/slurm/*.log 2>&1").stdout
                       for h in (self.controller, *self.nodes))
        raise RuntimeError(f"Slurm nodes not idle after {timeout:.0f}s: {states}{logs}")

    def down(self) -> None:
        for host in (*self.nodes, self.controller):
            self.lab.remove_host(host.name)


def start_cluster(lab: Lab, compute: int = 2, healthcheck: list[str] | None = None, first_index: int = FIRST_INDEX,
                  log=sys.stderr) -> SlurmCluster:
    """Boot 1 + `compute` lab hosts over the cached Slurm layer, configure and start the daemons, and wait until
    every node is idle. `healthcheck`: slurm.conf lines (gpunode.schedulers.slurm_conf.healthcheck_lines)."""
    timings: dict[str, float] = {}
    started = time.monotonic()
    layer = ensure_package_layer(ensure_rootfs(lab.mirror, log=log), PACKAGES, UNITS, log=log)
    timings["layer_s"] = time.monotonic() - started
    hosts = [lab.add_host(first_index + i, layers=(layer,)) for i in range(compute + 1)]
    timings["boot_s"] = time.monotonic() - started - timings["layer_s"]
    controller, nodes = hosts[0], hosts[1:]
    conf = ClusterConf(cluster=f"lab{lab.tag}", controller=(controller.name, controller.address),
                       nodes=[(n.name, n.address) for n in nodes], healthcheck=healthcheck or [])
    cluster = SlurmCluster(lab, controller, nodes, conf, timings)
    try:
        _configure(hosts, conf)
        for host in hosts:
            cluster._systemctl(host, "start", "munge")
        cluster._systemctl(controller, "start", "slurmctld")
        for host in nodes:
            cluster._systemctl(host, "start", "slurmd")
        cluster.wait_idle()
    except BaseException:
        for host in hosts:
            lab.remove_host(host.name)
        raise
    timings["total_s"] = time.monotonic() - started
    return cluster


def _configure(hosts: list[LabHost], conf: ClusterConf) -> None:
    """Same munge key, /etc/hosts and slurm.conf on every host (written into their disks from outside)."""
    key = os.urandom(128)  # mungekey(8) default key size is 1024 bits
    names = "".join(f"{h.address} {h.name}\n" for h in hosts)
    for host in hosts:
        root = host.root
        (root / "etc/hosts").write_text(f"127.0.0.1 localhost\n{names}")
        munge_key = root / "etc/munge/munge.key"
        munge_key.write_bytes(key)
        uid, gid = _ids(root, "munge")
        os.chown(munge_key, uid, gid)
        munge_key.chmod(0o400)
        (root / "etc/slurm/slurm.conf").write_text(conf.render())
        (root / "etc/slurm/cgroup.conf").write_text(lab_cgroup_conf())
        slurm_uid, slurm_gid = _ids(root, "slurm")
        for folder in ("var/lib/slurm/slurmctld", "var/lib/slurm/slurmd", "var/log/slurm"):
            path = root / folder
            path.mkdir(parents=True, exist_ok=True)
            os.chown(path, slurm_uid, slurm_gid)


def _ids(root: Path, user: str) -> tuple[int, int]:
    for line in (root / "etc/passwd").read_text().splitlines():
        fields = line.split(":")
        if fields[0] == user:
            return int(fields[2]), int(fields[3])
    raise RuntimeError(f"user {user} missing from {root}/etc/passwd")
