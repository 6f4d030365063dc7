"""What facts.sh costs a lab host: the programs it runs, counted with strace (no timing asserted)."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from gpunode.facts import facts_script, parse_facts

pytestmark = pytest.mark.lab

# Measured on a Debian 12 lab host (a container, so systemd-detect-virt runs twice: -c and -v; on a VM it
# runs once): systemd-detect-virt x2, find, awk, dpkg-query, systemctl, df and a timeout for each of the last
# three. Before issue 21 the same run executed 16 programs (date x2, uname, id, stat, grep and more).
PROGRAM_BOUND = 10
ALLOWED = {"systemd-detect-virt", "find", "awk", "dpkg-query", "timeout", "systemctl", "df"}


def _uid_gid(host, user: str) -> tuple[int, int]:
    for line in (host.root / "etc" / "passwd").read_text().splitlines():
        fields = line.split(":")
        if fields[0] == user:
            return int(fields[2]), int(fields[3])
    raise AssertionError(f"{user} not in {host.name}'s /etc/passwd")


def traced_run(host, user: str, trace_dir: Path) -> tuple[str, Counter[str]]:
    """facts.sh on `bash -s` inside the host as `user`, strace'd from outside: stdout and programs executed."""
    uid, gid = _uid_gid(host, user)
    enter = ["nsenter", "-t", str(host.init_pid()), "-m", "-u", "-i", "-n", "-p", "-S", str(uid), "-G", str(gid)]
    proc = subprocess.run(
        ["strace", "-f", "-ff", "-qq", "-e", "trace=execve", "-o", str(trace_dir / "t"), *enter, "--", "bash", "-s"],
        input=facts_script(), capture_output=True, text=True, timeout=120,
        env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr
    programs: Counter[str] = Counter()
    for trace in trace_dir.glob("t.*"):  # one file per process: no interleaved lines
        for path in re.findall(r'^execve\("([^"]+)", .*\) = 0$', trace.read_text(), re.M):
            programs[path.rsplit("/", 1)[-1]] += 1
    programs.subtract({"nsenter": 1, "bash": 1})  # the way in: nsenter, then the bash that reads facts.sh
    return proc.stdout, +programs


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace on the lab machine (dev/setup)")
@pytest.mark.parametrize("user", ["root", "gpunode"])
def test_facts_script_runs_few_programs(lab, tmp_path, user):
    host = lab.hosts[sorted(lab.hosts)[0]]
    out, programs = traced_run(host, user, tmp_path)
    facts = parse_facts(out)
    assert facts.complete and facts.hostname == host.name and facts.user == user
    assert facts.kernel.running and facts.os.arch and facts.boot_id and facts.container_virt == "systemd-nspawn"
    assert facts.os.id == "debian" and "dpkg-query" in facts.pkg.managers_found and "@@raw packages dpkg" in out
    assert "/" in facts.storage.free_bytes
    assert set(programs) <= ALLOWED, programs
    assert sum(programs.values()) <= PROGRAM_BOUND, programs
