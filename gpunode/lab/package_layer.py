"""A cached read-only layer of Debian packages installed over a lab rootfs: install once, lay it under many hosts."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from gpunode.lab.network import sh
from gpunode.lab.rootfs import cache_dir


def ensure_package_layer(rootfs: Path, packages: tuple[str, ...], disable: tuple[str, ...] = (),
                         log=sys.stderr) -> Path:
    """The overlay upper dir holding `packages` installed over `rootfs` (built once, then cached by rootfs and
    package list); `disable`: systemd units the packages enable that must not start at boot (the caller starts
    them once configured). Pass the result to `Lab.add_host(layers=...)`."""
    key = hashlib.sha256("\n".join([rootfs.name, *packages, "--disable", *disable]).encode()).hexdigest()[:12]
    target = cache_dir() / f"layer-{rootfs.name}-{key}"
    if (target / ".complete").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.with_name(target.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / ".complete").exists():  # another process built it while we waited
            return target
        print(f"lab: installing {' '.join(packages)} into a cached layer {target} (once)", file=log, flush=True)
        _build(rootfs, packages, disable, target, key)
    return target


def _build(rootfs: Path, packages: tuple[str, ...], disable: tuple[str, ...], target: Path, key: str) -> None:
    work = target.with_name(target.name + ".building")
    shutil.rmtree(work, ignore_errors=True)
    upper, scratch, merged = work / "upper", work / "work", work / "merged"
    for path in (upper, scratch, merged):
        path.mkdir(parents=True)
    sh("mount", "-t", "overlay", "overlay", "-o", f"lowerdir={rootfs},upperdir={upper},workdir={scratch}",
       str(merged))
    try:
        script = (
            "set -e; export DEBIAN_FRONTEND=noninteractive; apt-get -q update >/dev/null; "
            f"apt-get -q install -y --no-install-recommends {' '.join(packages)} >/dev/null; "
            + "".join(f"systemctl disable {unit} >/dev/null 2>&1 || true; " for unit in disable)
            + "apt-get clean; rm -rf /var/lib/apt/lists/*"
        )
        result = subprocess.run(
            ["systemd-nspawn", "--quiet", "--register=no", "--keep-unit", f"--machine=layer-{key}",
             f"--directory={merged}", "--resolv-conf=copy-host",
             "sh", "-c", script],
            capture_output=True, text=True, env={**os.environ, "SYSTEMD_SECCOMP": "0"},
        )
    finally:
        sh("umount", str(merged), check=False)
    if result.returncode != 0:
        shutil.rmtree(work, ignore_errors=True)
        tail = "\n".join((result.stderr or result.stdout).splitlines()[-15:])
        raise RuntimeError(f"installing {' '.join(packages)} into a lab layer failed (exit {result.returncode}):\n"
                           f"{tail}")
    (upper / ".complete").write_text(" ".join(packages) + "\n")
    shutil.rmtree(target, ignore_errors=True)
    upper.rename(target)
    shutil.rmtree(work, ignore_errors=True)
