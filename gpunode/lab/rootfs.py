"""Build (once) and cache the Debian root filesystem that every lab host boots from."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from gpunode.distros import LAB
from gpunode.lab.apt_sources import LAB_COMPONENTS, host_mirrors, lab_apt_options

SUITE = LAB.LAB_SUITE  # the default suite of lab hosts
# Suites a lab host can boot, by the names users give them: codename, version or alias.
SUITES = LAB.LAB_SUITES
LAB_USER = "gpunode"
PACKAGES = (
    "systemd-sysv", "dbus", "openssh-server", "python3", "sudo", "iproute2", "ca-certificates", "kmod",
)
# Run inside the new root by mmdebstrap, in order. Host keys are removed: each host gets its own at start.
CUSTOMIZE = (
    f"useradd --create-home --shell /bin/bash --groups sudo {LAB_USER}",
    f"echo '{LAB_USER} ALL=(ALL) NOPASSWD:ALL' > /etc/sudoers.d/{LAB_USER} && chmod 0440 /etc/sudoers.d/{LAB_USER}",
    "rm -f /etc/ssh/ssh_host_*",
    "printf 'PasswordAuthentication no\\nUseDNS no\\nPermitRootLogin prohibit-password\\n'"
    " > /etc/ssh/sshd_config.d/lab.conf",
    "systemctl mask ssh-keygen.service systemd-networkd-wait-online.service getty.target >/dev/null 2>&1 || true",
    ": > /etc/machine-id",
)


def cache_dir() -> Path:
    return Path(os.environ.get("GPUNODE_LAB_CACHE", "/var/cache/gpunode/lab"))


def suite_name(suite: str) -> str:
    """The Debian codename for a suite given as codename, version or alias (ValueError names the choices)."""
    try:
        return SUITES[suite.strip().lower()]
    except KeyError:
        raise ValueError(f"unknown Debian suite {suite!r} for a lab host; choose one of: {', '.join(SUITES)}") \
            from None


def _recipe(mirror: str | None, suite: str) -> tuple[list[str], str]:
    mirrors = host_mirrors(override=mirror)
    sources = mirrors.sources_list(suite)
    apt_options = lab_apt_options()
    args = [
        "mmdebstrap", "--variant=important", "--mode=root", f"--components={','.join(LAB_COMPONENTS)}",
        f"--include={','.join(PACKAGES)}",
        *(f"--aptopt={opt}" for opt in apt_options),
    ]
    hooks = [f'chroot "$1" sh -c {_q(cmd)}' for cmd in CUSTOMIZE]
    hooks.append(f"printf %s {_q(sources)} > \"$1/etc/apt/sources.list\"")
    if apt_options:
        hooks.append(f"printf '%s\\n' {' '.join(_q(o) for o in apt_options)} > \"$1/etc/apt/apt.conf.d/99lab-mirror\"")
    args += [f"--customize-hook={hook}" for hook in hooks]
    key = hashlib.sha256("\n".join(args + [sources]).encode()).hexdigest()[:12]
    return args + [suite, "{target}", sources], key


def _q(text: str) -> str:
    import shlex

    return shlex.quote(text)


def ensure_rootfs(mirror: str | None = None, log=sys.stderr, suite: str = SUITE) -> Path:
    """Return the cached rootfs directory of `suite`, building it with mmdebstrap (about a minute) when missing.

    Builds are serialised with a lock file: two labs starting at once wait for one build instead of each
    deleting the other's half-built tree."""
    suite = suite_name(suite)
    args, key = _recipe(mirror, suite)
    target = cache_dir() / f"rootfs-{suite}-{key}"
    if (target / "etc/os-release").exists():
        return target
    if not shutil.which("mmdebstrap"):
        raise RuntimeError("mmdebstrap is not installed: apt-get install -y mmdebstrap systemd-container")
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.with_name(target.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / "etc/os-release").exists():  # another process built it while we waited
            return target
        building = target.with_name(target.name + ".building")
        shutil.rmtree(building, ignore_errors=True)
        print(f"lab: building the Debian {suite} rootfs in {target} (about a minute, once)", file=log, flush=True)
        command = [building.as_posix() if a == "{target}" else a for a in args]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            shutil.rmtree(building, ignore_errors=True)
            tail = "\n".join((result.stderr or result.stdout).splitlines()[-15:])
            raise RuntimeError(f"mmdebstrap failed (exit {result.returncode}):\n{tail}")
        building.rename(target)
    return target
