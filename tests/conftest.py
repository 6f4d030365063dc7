"""Fixtures: a session lab of real hosts (systemd-nspawn + sshd), fresh hosts on demand, CLI runner."""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    # A suite started in the background (`nohup bash dev/test &`: a shell starts background jobs with SIGINT ignored)
    # would pass SIGINT-ignored on to every child through exec, and the tests that press Ctrl-C on a gpunode child
    # would then see nothing happen. A handler (unlike SIG_IGN) is reset to the default at exec, so each child's
    # Python installs its own KeyboardInterrupt again.
    signal.signal(signal.SIGINT, signal.default_int_handler)

LAB_TAG = os.environ.get("GPUNODE_TEST_LAB_TAG", "test")
LAB_SUBNET = os.environ.get("GPUNODE_TEST_LAB_SUBNET", "10.231.2.0/24")
REQUIRE_LAB = os.environ.get("GPUNODE_REQUIRE_LAB") == "1"


def lab_unavailable() -> str | None:
    """Why the lab cannot run here (None when it can)."""
    if os.geteuid() != 0:
        return "the lab needs root"
    missing = [t for t in ("systemd-nspawn", "mmdebstrap", "iptables") if not shutil.which(t)]
    return f"missing {', '.join(missing)}" if missing else None


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 900) -> CliResult:
    """Run `python -m gpunode ...` as a user would; returns exit code and output."""
    result = subprocess.run([sys.executable, "-m", "gpunode", *args], cwd=REPO, capture_output=True, text=True,
                            env={**os.environ, "COLUMNS": "200", **(env or {})}, timeout=timeout)
    return CliResult(result.returncode, result.stdout, result.stderr)


@pytest.fixture(scope="session")
def lab():
    """Three running lab hosts for the whole session; torn down at the end, on failure or interrupt."""
    reason = lab_unavailable()
    if reason:
        if REQUIRE_LAB:
            pytest.fail(f"lab required but unavailable: {reason}")
        pytest.skip(f"lab unavailable: {reason}")
    from gpunode.lab.lab import Lab

    the_lab = Lab(LAB_TAG, LAB_SUBNET)
    the_lab.down()  # leftovers of an interrupted earlier run

    def teardown(*_args) -> None:
        the_lab.down()

    atexit.register(teardown)
    previous = signal.signal(signal.SIGTERM, lambda *a: (teardown(), sys.exit(143)))
    try:
        the_lab.up(3)
        yield the_lab
    finally:
        teardown()
        atexit.unregister(teardown)
        signal.signal(signal.SIGTERM, previous)


_fresh_index = itertools.count(20)


@pytest.fixture
def fresh_host(lab):
    """A brand-new host (its own disk), removed after the test."""
    host = lab.add_host(next(_fresh_index))
    yield host
    lab.remove_host(host.name)


@pytest.fixture
def new_host(lab):
    """A factory of brand-new hosts of any Debian suite (`new_host("trixie")`), all removed after the test."""
    started = []

    def start(suite: str = "bookworm"):
        host = lab.add_host(next(_fresh_index), suite=suite)
        started.append(host)
        return host

    yield start
    for host in started:
        lab.remove_host(host.name)


@pytest.fixture
def fresh_trixie_host(new_host):
    """A brand-new Debian 13 (trixie) host, removed after the test."""
    return new_host("trixie")


@pytest.fixture
def fresh_trio(lab):
    """Three brand-new hosts, for tests that need untouched machines in parallel."""
    hosts = [lab.add_host(next(_fresh_index)) for _ in range(3)]
    yield hosts
    for host in hosts:
        lab.remove_host(host.name)


@contextlib.contextmanager
def host_iptables(lab, host, *rule: str) -> Iterator[None]:
    """An iptables rule (chain first) inside a lab host's network namespace while the block runs: drops that act
    like a security group, a cut cable or an offline network."""
    netns = ["ip", "netns", "exec", lab.network.netns_name(host.name), "iptables", "-w"]
    subprocess.run([*netns, "-I", *rule], check=True)
    try:
        yield
    finally:
        subprocess.run([*netns, "-D", *rule], check=True)


def host_inventory(lab, hosts, path: Path, extra_hosts: dict | None = None, **extra_vars) -> Path:
    """An inventory file for some lab hosts (YAML, Ansible variable names); extra_hosts: name -> address."""
    import yaml

    entries = {h.name: {"ansible_host": h.address} for h in hosts}
    entries.update({name: {"ansible_host": address} for name, address in (extra_hosts or {}).items()})
    data = {"all": {"children": {"lab": {
        "hosts": entries,
        "vars": {"ansible_user": "gpunode", "ansible_become": True,
                 "ansible_ssh_private_key_file": str(lab.key_path), "known_hosts": str(lab.known_hosts_path),
                 **extra_vars},
    }}}}
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture(scope="session")
def nfs_server(lab):
    """The lab's NFS server (nfs-ganesha + rpcbind in its own namespace on the lab bridge), for the session."""
    from gpunode.lab.nfs import REQUIRED, LabNfsServer

    missing = [tool for tool in REQUIRED if not shutil.which(tool)]
    if missing:
        (pytest.fail if REQUIRE_LAB else pytest.skip)(f"lab NFS server unavailable: missing {', '.join(missing)}")
    server = LabNfsServer(lab.network, lab.directory).up()
    yield server
    server.down()


@pytest.fixture
def slurm_cluster_factory(lab):
    """Start real Slurm clusters on lab hosts (Debian 12's slurmctld/slurmd/munge, Slurm 22.05: a controller and
    `compute` slurmd hosts, about 2 s once the package layer is cached); each is removed after the test.
    `start(compute=2, healthcheck=[slurm.conf lines])` returns a gpunode.lab.slurm.SlurmCluster."""
    from gpunode.lab.slurm import FIRST_INDEX, start_cluster

    clusters = []

    def start(compute: int = 2, healthcheck: list[str] | None = None):
        first = FIRST_INDEX + sum(len(c.nodes) + 1 for c in clusters)
        cluster = start_cluster(lab, compute, healthcheck=healthcheck, first_index=first)
        clusters.append(cluster)
        return cluster

    yield start
    for cluster in clusters:
        cluster.down()


@pytest.fixture
def slurm_cluster(slurm_cluster_factory):
    """A running Slurm cluster: one controller, two idle compute nodes."""
    return slurm_cluster_factory()
