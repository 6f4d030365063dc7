"""scripts/facts.sh itself: syntax, shellcheck, and real runs on this machine."""

from __future__ import annotations

import fcntl
import os
import pwd
import re
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
    assert facts.script_ms is not None and facts.script_ms > 0  # a clock that moves forward; no time limit asserted
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


# ---- the builtin replacements of commands (issue 21): each against the command it replaces ---------------


def script_parts(*names: str) -> str:
    """Definitions taken from facts.sh: functions (`name() {` to the `}` at column 0, or on one line) and
    `name=...` lines."""
    text = facts_script()
    parts = []
    for name in names:
        match = (re.search(rf"^{name}\(\) \{{\n.*?^\}}\n", text, re.S | re.M)
                 or re.search(rf"^{name}\(\) \{{ .*\}}\n", text, re.M) or re.search(rf"^{name}=.*\n", text, re.M))
        assert match, f"{name} not defined in facts.sh"
        parts.append(match.group(0))
    return "".join(parts)


def bash(code: str, *args: str) -> str:
    proc = subprocess.run(["bash", "-c", "export LC_ALL=C\nshopt -s nullglob\n" + code + "\n:", "bash", *args],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.parametrize("data", [b"\x06\x00\x00\x00\x01", b"\x07\x00\x00\x00\x00", b"\x06\x00\x00\x00",
                                  b"\x00\x00\x00\x00\xff\x01", b"\n\n\x00\n\x02", b"", b"ab\\cd"])
def test_byte_at_reads_the_byte_od_reads(tmp_path: Path, data: bytes) -> None:
    """SecureBoot from efivarfs: the 5th byte (after 4 bytes of attributes), NULs and all."""
    path = tmp_path / "SecureBoot"
    path.write_bytes(data)
    code = script_parts("byte_at") + 'for o in 0 1 2 3 4 5; do byte_at v "$1" "$o"; printf "%s;" "$v"; done'
    ours = bash(code, str(path))
    od = "".join(subprocess.run(["od", "-An", "-tu1", f"-j{o}", "-N1", str(path)], capture_output=True,
                                text=True).stdout.strip() + ";" for o in range(6))
    assert ours == od


def test_blacklist_scan_names_the_files_grep_names(tmp_path: Path) -> None:
    etc, run = tmp_path / "etc", tmp_path / "run"
    (etc / "sub" / "deeper").mkdir(parents=True)
    run.mkdir()
    files = {
        etc / "blacklist-nouveau.conf": "blacklist nouveau\n",
        etc / "commented.conf": "# blacklist nouveau\noptions nvidia NVreg_X=1\n",
        etc / "sub" / "deeper" / "nested.conf": "options x\n  blacklist\tnouveau  \n",
        etc / ".hidden.conf": "blacklist nouveau",  # no newline at the end
        etc / "not-a-conf.txt": "blacklist nouveau\n",
        etc / "other-module.conf": "blacklist nouveaux\nblacklist nouveau_x\n",
        run / "crlf.conf": "blacklist nouveau\r\n",
        tmp_path / "elsewhere.conf": "blacklist nouveau\n",
    }
    for path, text in files.items():
        path.write_text(text)
    (etc / "link.conf").symlink_to(tmp_path / "elsewhere.conf")  # below a directory: grep -r skips links
    (etc / "linked-dir").symlink_to(run)
    dirs = [str(etc), str(run), str(tmp_path / "missing")]
    code = (script_parts("kv", "re_blacklist", "blacklist_scan")
            + 'for d in "$@"; do [[ -d $d ]] && blacklist_scan "$d"; done')
    ours = [line.partition("=")[2] for line in bash(code, *dirs).splitlines()]
    pattern = r"^[[:space:]]*blacklist[[:space:]]+nouveau([[:space:]]|$)"
    grep = subprocess.run(["grep", "-rlsE", "--include=*.conf", pattern, *dirs],
                          capture_output=True, text=True).stdout.split()
    assert sorted(ours) == sorted(grep)  # the parser sorts: grep lists them in directory order
    assert len(set(ours)) == len(ours) == 4


def test_path_of_is_what_command_v_prints(tmp_path: Path) -> None:
    """From bash's hash table, else from `command -v` itself (which also names a non-executable file)."""
    (tmp_path / "tool").write_text("#!/bin/sh\n")
    (tmp_path / "tool").chmod(0o755)
    (tmp_path / "plain").write_text("not executable\n")
    code = script_parts("have", "path_of") + (
        f'PATH="{tmp_path}:$PATH"\n'
        'for c in bash tool plain no-such-command; do path_of v "$c"; w=$(command -v "$c")\n'
        '  printf "%s|%s\\n" "$v" "$w"; done')
    lines = bash(code).splitlines()
    assert [line.split("|")[0] for line in lines] == [line.split("|")[1] for line in lines]
    assert lines[1:] == [f"{tmp_path}/tool|{tmp_path}/tool", f"{tmp_path}/plain|{tmp_path}/plain", "|"]


def test_user_is_the_passwd_name_of_the_effective_uid() -> None:
    facts = parse_facts(run_script()[0])
    assert facts.user == pwd.getpwuid(os.geteuid()).pw_name
    assert facts.os.arch == os.uname().machine
