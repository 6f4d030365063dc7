"""Method runfile: the build tools, NVIDIA's installer run with an explicit module type (and past its nouveau check
when nouveau is loaded), and the nvidia-persistenced unit the runfile does not install."""

from __future__ import annotations

from gpunode.connection import q
from gpunode.facts import Facts
from gpunode.gpu.driver_facts import NVIDIA
from gpunode.steps.base import Action
from gpunode.steps.nvidia_install import curl_first, dkms_repos
from gpunode.steps.pkgmgr import PackageManager, Wanted
from gpunode.steps.remote_file import parse_file_probe, write_action
from gpunode.vendor_facts import value

# The runfile installs nvidia-persistenced but no unit for it (NVIDIA ships only a sample in the docs).
PERSISTENCED_UNIT = "/etc/systemd/system/nvidia-persistenced.service"
PERSISTENCED_CONTENT = """# Written by gpunode: nvidia-persistenced for a runfile-installed driver.
[Unit]
Description=NVIDIA Persistence Daemon
Wants=syslog.target

[Service]
Type=forking
ExecStart=/usr/bin/nvidia-persistenced --verbose
ExecStopPost=/bin/rm -rf /var/run/nvidia-persistenced

[Install]
WantedBy=multi-user.target
"""
RUNFILE_BUILD_TOOLS = ["gcc", "make", "dkms"]


def runfile_installs(facts: Facts, method: str, branch: int) -> bool:
    """Method runfile and the loaded driver is not of the branch: the runfile runs."""
    loaded = facts.nvidia.driver_version or ""
    return method == "runfile" and not loaded.startswith(f"{branch}.")


def runfile_actions(facts: Facts, manager: PackageManager, installed: dict[str, str], flavor: str, target: str,
                    unit_probe: str, *, source: str, installs: bool, persistenced: bool,
                    timeout: int) -> list[Action]:
    """Build tools first, the runfile `source` (when it `installs`) with an explicit module type, a unit for
    nvidia-persistenced."""
    actions = []
    tools = [Wanted(t) for t in RUNFILE_BUILD_TOOLS if t not in installed]
    if tools:
        setup = dkms_repos(facts)
        install = manager.install(tools, refresh=True, recommends=False)
        actions.append(Action(f"install the driver's build tools: {', '.join(w.name for w in tools)}",
                              "the runfile compiles the kernel module with DKMS",
                              f"{setup} && {{ {install}; }}" if setup else install, timeout=timeout))
    if installs:
        fetch = f"{curl_first(facts, manager)} && curl -fsSL -o /tmp/nvidia.run {q(source)}" \
            if "://" in source else f"cp {q(source)} /tmp/nvidia.run"
        module = "kernel-open" if flavor == "open" else "kernel"  # the runfile's default changed in 560
        extra, why = runfile_nouveau_options(facts)
        actions.append(Action(
            f"install the driver from {source} ({flavor} modules)", f"method: runfile{why}",
            f"{fetch} && sh /tmp/nvidia.run --dkms --silent -m={module}{extra} -k {q(target)}; rc=$?; "
            "rm -f /tmp/nvidia.run; exit $rc", timeout=timeout,
            fix="see /var/log/nvidia-installer.log on the host"))
    if persistenced:
        unit = parse_file_probe(unit_probe)
        if unit.content != PERSISTENCED_CONTENT:
            actions.append(write_action(PERSISTENCED_UNIT, unit, PERSISTENCED_CONTENT,
                                        reason="the runfile installs no unit for nvidia-persistenced"))
    return actions


def runfile_nouveau_options(facts: Facts) -> tuple[str, str]:
    """With nouveau loaded, nvidia-installer's silent mode answers ABORT to its nouveau check: the installer's own
    options skip the check and the module test load (which nouveau would fail); the blacklist written before and the
    reboot planned for nouveau make the new module load. (options, what to add to the reason)"""
    if not facts.nvidia.nouveau_loaded:
        return "", ""
    options = f" {value(NVIDIA, 'runfile_no_nouveau_check')} {value(NVIDIA, 'runfile_skip_module_load')}"
    return options, "; nouveau is loaded: the installer's nouveau check and test load are skipped, the reboot " \
        "planned for nouveau loads the new module"
