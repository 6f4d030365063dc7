"""How each tool is invoked on the bench work, and what its output says (changed count, failures)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bench import workload
from bench.workload import Access, BenchHost

FLOOR = Path(__file__).resolve().parent / "floor.py"


@dataclass
class Invocation:
    """One ready-to-run command line for a tool, plus what to read afterwards."""

    argv: list[str]
    env: dict[str, str]
    report: Path | None = None      # gpunode's JSON report
    cleanup_dir: Path | None = None  # ansible's ControlPath folder


@dataclass
class Outcome:
    """What the tool said about its run."""

    ok: bool
    changed: int | None
    exec_count: int | None = None   # gpunode's own count (transcripts), to cross-check sshd's


class Tool:
    """Base: `prepare` writes files once per host set; `invocation` builds one run."""

    name = ""

    def prepare(self, folder: Path, hosts: list[BenchHost], access: Access) -> None:
        raise NotImplementedError

    def invocation(self, folder: Path, forks: int, run_id: str) -> Invocation:
        raise NotImplementedError

    def outcome(self, invocation: Invocation, exit_code: int, output: str) -> Outcome:
        raise NotImplementedError

    def finish(self, invocation: Invocation) -> None:
        """Called after each run (e.g. stop ssh master connections)."""


class Gpunode(Tool):
    name = "gpunode"

    def prepare(self, folder: Path, hosts: list[BenchHost], access: Access) -> None:
        self.playbook, self.inventory = workload.write_gpunode(folder, hosts, access)

    def invocation(self, folder: Path, forks: int, run_id: str) -> Invocation:
        report = folder / f"gpunode-{run_id}.json"
        argv = [sys.executable, "-m", "gpunode", "provision", "-i", str(self.inventory), "--playbook",
                str(self.playbook), "-f", str(forks), "--json-report", str(report),
                "--log-dir", str(folder / f"logs-{run_id}")]
        # its own facts cache per host set: a first apply starts without one, as on brand-new hosts
        return Invocation(argv, {"COLUMNS": "160", "XDG_CACHE_HOME": str(folder / "cache")}, report=report)

    def outcome(self, invocation: Invocation, exit_code: int, output: str) -> Outcome:
        assert invocation.report is not None
        if not invocation.report.exists():
            return Outcome(False, None)
        hosts = json.loads(invocation.report.read_text())["hosts"]
        return Outcome(exit_code == 0, sum(h["changed"] for h in hosts), sum(h["exec_count"] for h in hosts))


class Floor(Tool):
    """bench/floor.py with gpunode's python: one paramiko connection and one `true` per host, a thread per host.

    It does no work, so its `first` run is the same program as its converged ones."""

    name = "floor"

    def prepare(self, folder: Path, hosts: list[BenchHost], access: Access) -> None:
        self.hosts = hosts
        self.access = access

    def invocation(self, folder: Path, forks: int, run_id: str) -> Invocation:
        argv = [sys.executable, str(FLOOR), "--user", self.access.user, "--key", self.access.key,
                "--known-hosts", self.access.known_hosts, *(f"{h.address}:{h.port}" for h in self.hosts)]
        return Invocation(argv, {})

    def outcome(self, invocation: Invocation, exit_code: int, output: str) -> Outcome:
        ran = sum(1 for line in output.splitlines() if line.endswith(" ok"))
        return Outcome(exit_code == 0 and ran == len(self.hosts), 0, ran)


class Ansible(Tool):
    """ansible-playbook, tuned: pipelining, python interpreter pinned, forks = hosts, no fact gathering.

    `gather_facts=True` is the default Ansible play (the `setup` module runs first on every host).
    Each run starts cold: its own ControlPath folder, the master connections closed afterwards.
    """

    def __init__(self, bin_dir: Path, gather_facts: bool = False) -> None:
        self.bin_dir = bin_dir
        self.gather_facts = gather_facts
        self.name = "ansible-facts" if gather_facts else "ansible"

    def prepare(self, folder: Path, hosts: list[BenchHost], access: Access) -> None:
        self.access = access
        self.playbook, self.inventory = workload.write_ansible(folder, hosts, access, self.gather_facts)

    def invocation(self, folder: Path, forks: int, run_id: str) -> Invocation:
        control = Path(tempfile.mkdtemp(prefix="cp-", dir="/tmp"))  # short: ssh limits socket path length
        env = {
            "ANSIBLE_PIPELINING": "True",
            "ANSIBLE_SSH_ARGS": f"-C -o ControlMaster=auto -o ControlPersist=60s "
                                f"-o UserKnownHostsFile={self.access.known_hosts} -o StrictHostKeyChecking=yes",
            "ANSIBLE_SSH_CONTROL_PATH_DIR": str(control),
            "ANSIBLE_HOST_KEY_CHECKING": "True",
            "ANSIBLE_FORKS": str(forks),
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_RETRY_FILES_ENABLED": "False",
            "ANSIBLE_LOCAL_TEMP": str(folder / "ansible-tmp"),
            "ANSIBLE_CONFIG": str(folder / "no-ansible.cfg"),  # none: defaults plus the variables above
        }
        argv = [str(self.bin_dir / "ansible-playbook"), "-i", str(self.inventory), str(self.playbook)]
        return Invocation(argv, env, cleanup_dir=control)

    def outcome(self, invocation: Invocation, exit_code: int, output: str) -> Outcome:
        recap = output.rpartition("PLAY RECAP")[2]
        changed = [int(n) for n in re.findall(r"\bchanged=(\d+)", recap)]
        return Outcome(exit_code == 0 and bool(changed), sum(changed) if changed else None)

    def finish(self, invocation: Invocation) -> None:
        if invocation.cleanup_dir is None:
            return
        for socket_path in invocation.cleanup_dir.iterdir():
            subprocess.run(["ssh", "-O", "exit", "-o", f"ControlPath={socket_path}", "bench"],
                           capture_output=True, timeout=10)
        for leftover in invocation.cleanup_dir.iterdir():
            leftover.unlink(missing_ok=True)
        invocation.cleanup_dir.rmdir()


class Pyinfra(Tool):
    """pyinfra with its operations (apt.packages, files.line, files.put); hosts in parallel."""

    name = "pyinfra"

    def __init__(self, bin_dir: Path) -> None:
        self.bin_dir = bin_dir

    def prepare(self, folder: Path, hosts: list[BenchHost], access: Access) -> None:
        self.deploy, self.inventory = workload.write_pyinfra(folder, hosts, access)

    def invocation(self, folder: Path, forks: int, run_id: str) -> Invocation:
        argv = [str(self.bin_dir / "pyinfra"), "-y", "--parallel", str(forks), str(self.inventory),
                str(self.deploy)]
        return Invocation(argv, {"PYINFRA_PROGRESS": "off", "COLUMNS": "160"})

    def outcome(self, invocation: Invocation, exit_code: int, output: str) -> Outcome:
        total = re.search(r"Grand total\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)", output)
        changed = _count(total.group(2)) if total else _pyinfra_changed(output)
        return Outcome(exit_code == 0, changed)


def _count(cell: str) -> int:
    return int(cell) if cell.isdigit() else 0


def _pyinfra_changed(output: str) -> int | None:
    """Changed operations from pyinfra's per-host lines ("[host] Success" vs "[host] No changes")."""
    lines = [ln for ln in output.splitlines() if re.match(r"\s*\[[^\]]+\] ", ln)]
    if not lines:
        return None
    return sum(1 for ln in lines if "Success" in ln and "No changes" not in ln)
