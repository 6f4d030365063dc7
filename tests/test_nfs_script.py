"""scripts/nfs_mount.sh run for real on this machine: shellcheck, probe, busy detection, unmount, write test.

A tmpfs stands in for the share (this kernel has no NFS client); the script treats any mount the same way.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from gpunode.steps.nfs.state import parse_state

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "nfs_mount.sh"
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs: needs root")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=60)


@pytest.fixture
def share(tmp_path):
    """A tmpfs mounted at tmp_path/mnt with an NFS-like source name; unmounted afterwards."""
    point = tmp_path / "mnt point"
    point.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "nas.example:/export", str(point)], check=True)
    yield point
    subprocess.run(["umount", "-l", str(point)], capture_output=True)


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="needs shellcheck (apt-get install shellcheck)")
def test_shellcheck_warnings_clean():
    proc = subprocess.run(["shellcheck", "-S", "warning", str(SCRIPT)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_probe_of_an_unresolvable_server_and_a_missing_mount_point(tmp_path):
    result = run("probe", "nas.invalid", str(tmp_path / "nowhere"), "1", "1", "2")
    assert result.returncode == 0, result.stderr
    state = parse_state(result.stdout)
    assert state.addresses == [] and state.ports == {}  # no port checks without an address
    assert state.path == "missing" and state.mounts == []
    assert state.kernel in ("builtin", "module", "none")
    assert state.findmnt in ("verify", "plain", "absent")


@needs_root
def test_probe_sees_the_mount_and_who_uses_it(share):
    sleeper = subprocess.Popen(["sleep", "60"], cwd=share)
    try:
        state = parse_state(run("probe", "localhost", str(share), "0", "0", "2").stdout)
        assert state.share is not None
        assert (state.share.source, state.share.fstype) == ("nas.example:/export", "tmpfs")
        assert (sleeper.pid, "sleep") in state.users
        assert state.path == "dir" and state.addresses is None  # preflight off
    finally:
        sleeper.kill()
        sleeper.wait()


@needs_root
def test_unmount_refuses_while_busy_and_names_the_process(share):
    holder = subprocess.Popen(["sleep", "60"], stdin=subprocess.DEVNULL, cwd=share)
    try:
        busy = run("unmount", str(share))
        assert busy.returncode == 1
        assert f"gpunode: {share} is busy" in busy.stderr and f"{holder.pid} sleep" in busy.stderr
        assert "gpunode-fix: stop those processes" in busy.stderr
        assert os.path.ismount(share)
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    done = run("unmount", str(share))
    assert done.returncode == 0, done.stderr
    assert not os.path.ismount(share)


@needs_root
def test_write_test_writes_reads_back_and_cleans_up(share):
    assert run("write-test", str(share)).returncode == 0
    assert list(share.iterdir()) == []
    subprocess.run(["mount", "-o", "remount,ro", str(share)], check=True)
    failed = run("write-test", str(share))
    assert failed.returncode == 1 and "gpunode: could not write, read back and delete" in failed.stderr
