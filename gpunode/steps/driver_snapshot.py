"""The NVIDIA packages a host holds before a change, and the one apt transaction that gives them back.

A rolling run (runner/rolling.py) takes the snapshot just before a host's first change that disturbs its GPUs; when
the change or the gate fails, the packages whose version changed are installed at their old version again and the
ones the change added are removed, in one transaction (apt resolves both together). Held packages stay held.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpunode.connection import join
from gpunode.steps.pkgmgr import APT_ENV, APT_OPTS

# Debian's and NVIDIA's repositories name the driver's packages *nvidia* (nvidia-driver, libnvidia-ml1,
# nvidia-kernel-dkms, firmware-nvidia-gsp, ...) plus libcuda1, libnvcuvid1 and libnvoptix1.
PATTERNS = ("*nvidia*", "libcuda*", "libnvcuvid*", "libnvoptix*")
SNAPSHOT_COMMAND = (
    "if command -v dpkg-query >/dev/null 2>&1; then echo 'manager apt'; "
    "dpkg-query -W -f '${Package}\\t${Version}\\t${db:Status-Abbrev}\\n' "
    + " ".join(f"'{p}'" for p in PATTERNS) + " 2>/dev/null; "
    "elif command -v rpm >/dev/null 2>&1; then echo 'manager rpm'; else echo 'manager none'; fi; "
    "cat /sys/module/nvidia/version 2>/dev/null | sed 's/^/loaded /'; true")


@dataclass(frozen=True)
class DriverSnapshot:
    """What was installed (name -> version, fully installed only), by which package manager."""

    manager: str
    installed: dict[str, str]
    loaded: str = ""  # the NVIDIA module version loaded then ("" when none)

    @classmethod
    def parse(cls, text: str) -> DriverSnapshot:
        manager, installed, loaded = "none", {}, ""
        for line in text.splitlines():
            if line.startswith("manager "):
                manager = line.split()[1]
            elif line.startswith("loaded "):
                loaded = line.split()[1]
            elif line.count("\t") == 2:
                name, version, status = line.split("\t")
                if status.strip() in ("ii", "hi") and version:  # installed, or installed and held
                    installed[name] = version
        return cls(manager, installed, loaded)

    def restore_specs(self, now: DriverSnapshot) -> list[str]:
        """apt-get install arguments that return from `now` to this snapshot: name=version, and name- to remove."""
        back = [f"{name}={version}" for name, version in sorted(self.installed.items())
                if now.installed.get(name) != version]
        added = [f"{name}-" for name in sorted(now.installed) if name not in self.installed]
        return back + added

    def restore_command(self, now: DriverSnapshot) -> str | None:
        """The one command that restores, or None when nothing differs."""
        specs = self.restore_specs(now)
        if not specs:
            return None
        return APT_ENV + " " + join(["apt-get", "install", *APT_OPTS, "--no-install-recommends", "--allow-downgrades",
                                     "--allow-change-held-packages", *specs])
