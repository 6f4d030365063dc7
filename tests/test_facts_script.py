"""scripts/facts.sh itself: syntax, shellcheck, and real runs on this machine."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from gpunode.facts import facts_script, parse_facts

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "facts.sh"
DPKG_LOCK = Path("/var/lib/dpkg/lock-frontend")


def run_script(*prefix: str, env: dict[str, str] | None = None) -> tuple[str, float]:
    """Feed the script on stdin as ssh does (`bash -s`); return stdout and wall time."""
    start = time.monotonic()
    proc = subprocess.run(
        [*prefix, "bash", "-s"], input=facts_script(), capture_output=True, text=True, env=env, timeout=30
    )
    elapsed = time.monotonic() - start
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, elapsed


def test_facts_script_is_the_repo_file() -> None:
    text = facts_script()
    assert text == SCRIPT.read_text(encoding="utf-8")
    assert text.startswith("#!/usr/bin/env bash") and "@@gpunode-facts 1" in text


def test_bash_syntax() -> None:
    proc = subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.skipif(
    shutil.which("shellcheck") is None, reason="needs shellcheck (apt-get install shellcheck)"
)
def test_shellcheck_warnings_clean() -> None:
    proc = subprocess.run(["shellcheck", "-S", "warning", str(SCRIPT)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_real_run_on_this_machine() -> None:
    out, _elapsed = run_script()  # its speed is measured in bench/, not asserted under a loaded CI machine
    facts = parse_facts(out)
    assert facts.complete
    assert facts.script_ms is not None and facts.script_ms < 1000
    assert facts.kernel.running == os.uname().release
    assert facts.os.arch == os.uname().machine
    assert Path("/proc/sys/kernel/random/boot_id").read_text().strip() == facts.boot_id
    assert facts.boot_marker.startswith(facts.boot_id + ":")
    assert facts.boot_marker.rsplit(":", 1)[1].isdigit()
    assert facts.uid == os.geteuid()
    assert facts.hostname == os.uname().nodename
    assert facts.uptime_seconds is not None and facts.uptime_seconds > 0
    assert facts.gpus == () and not facts.nvswitch_present
    assert facts.nvidia.driver_version is None and facts.nvidia.modules_loaded == ()
    assert "/" in facts.storage.free_bytes and facts.storage.free_bytes["/"] > 0
    root = facts.storage.mount_at("/")
    assert root is not None and root.fstype
    for holder in facts.pkg.lock_holders:  # normally none; apt may run here concurrently
        assert holder.path in facts.pkg.lock_files and holder.pid > 0


@pytest.mark.skipif(not Path("/etc/debian_version").exists(), reason="dev/CI machine is Debian 12")
def test_real_run_sees_debian_12() -> None:
    facts = parse_facts(run_script()[0])
    assert (facts.os.id, facts.os.version_major, facts.os.codename) == ("debian", 12, "bookworm")
    assert (facts.os.family, facts.os.package_manager) == ("debian", "apt")
    assert "apt-get" in facts.pkg.managers_found


def test_runs_with_empty_environment() -> None:
    # ssh `bash -s` may give a bare environment: no PATH beyond the default, no USER, no LANG
    out, _ = run_script("env", "-i", env={"PATH": "/usr/bin:/bin"})
    facts = parse_facts(out)
    assert facts.complete and facts.kernel.running == os.uname().release
    assert facts.user  # from `id -un`, not $USER


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("runuser") is None, reason="needs root and runuser")
def test_runs_as_unprivileged_user() -> None:
    out, _elapsed = run_script("runuser", "-u", "nobody", "--")
    facts = parse_facts(out)
    assert facts.complete
    assert facts.uid == 65534 and facts.user == "nobody"
    assert facts.kernel.running == os.uname().release
    assert facts.boot_id == Path("/proc/sys/kernel/random/boot_id").read_text().strip()


@pytest.mark.skipif(
    os.geteuid() != 0 or not DPKG_LOCK.exists(), reason="needs root and /var/lib/dpkg/lock-frontend"
)
def test_real_dpkg_lock_holder_is_found() -> None:
    """Hold the real dpkg frontend lock in a child process (as apt does) for a moment and probe."""
    fd = os.open(DPKG_LOCK, os.O_RDWR)
    try:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # is it free right now?
        except OSError:
            pytest.skip("dpkg lock is busy (apt running)")
        fcntl.lockf(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
    holder_code = (
        "import fcntl, os, sys, time\n"
        f"fd = os.open({str(DPKG_LOCK)!r}, os.O_RDWR)\n"
        "fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
        "print('locked', flush=True)\n"
        "sys.stdin.read()\n"
    )
    holder = subprocess.Popen(
        ["python3", "-c", holder_code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        facts = parse_facts(run_script()[0])
    finally:
        holder.communicate("", timeout=10)
    holders = [h for h in facts.pkg.lock_holders if h.pid == holder.pid]
    assert [h.path for h in holders] == [str(DPKG_LOCK)]
    assert holders[0].comm.startswith("python")
    assert "fcntl.lockf" in holders[0].command


def _can_unshare_mounts() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None or not DPKG_LOCK.exists():
        return False
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    return probe.returncode == 0


@pytest.mark.skipif(not _can_unshare_mounts(), reason="needs root, unshare -m and the dpkg lock file")
def test_lock_of_same_path_in_other_mount_namespace_is_not_reported(tmp_path: Path) -> None:
    """apt inside a container locks *its* /var/lib/dpkg/lock-frontend: not a holder of ours."""
    other = tmp_path / "lock-frontend"
    other.touch()
    holder_code = (
        "import fcntl, os, sys\n"
        f"fd = os.open({str(DPKG_LOCK)!r}, os.O_RDWR)\n"
        "fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
        "print(os.getpid(), flush=True)\n"
        "sys.stdin.read()\n"
    )
    shell = f'mount --bind {other} {DPKG_LOCK} && exec python3 -c "$0"'
    holder = subprocess.Popen(
        ["unshare", "-m", "sh", "-c", shell, holder_code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        pid = int(holder.stdout.readline())
        facts = parse_facts(run_script()[0])
    finally:
        holder.communicate("", timeout=10)
    assert pid not in {h.pid for h in facts.pkg.lock_holders}
