"""Host-level checks: DKMS build, nouveau, fabric manager, container runtime."""

from __future__ import annotations

from gpunode.parsers.dkms import DkmsEntry, parse_dkms_status
from gpunode.parsers.errors_text import classify_errors
from gpunode.parsers.model import Finding, Severity
from gpunode.verify.evidence import Evidence


def _driver_works(evidence: Evidence) -> bool:
    return evidence.smi is not None and bool(evidence.smi.gpus or evidence.smi.attached_gpus)


def host_checks(evidence: Evidence) -> list[Finding]:
    """dkms-*, kernel-guard-*, nouveau-loaded, fabricmanager-*, dev-char-links-missing, container checks."""
    return [*_dkms(evidence), *_kernel_guard(evidence), *_next_boot(evidence), *_nouveau(evidence),
            *_fabric_manager(evidence), *_dev_char(evidence), *_container(evidence)]


def _dev_char(evidence: Evidence) -> list[Finding]:
    """An NVIDIA device without its /dev/char/MAJOR:MINOR link: runc with the systemd cgroup driver then loses
    the device at the next `systemctl daemon-reload` ("Failed to initialize NVML: Unknown Error" in running
    containers; NVIDIA/nvidia-container-toolkit issues 251, 1227, NVIDIA's troubleshooting page)."""
    from gpunode.parsers.dev_char import link_problems

    problems = link_problems(evidence.dev_char or "")
    if not problems:
        return []
    return [Finding("dev-char-links-missing", "warning",
                    f"{len(problems)} NVIDIA device(s) without their /dev/char link: running GPU containers lose "
                    "their GPUs at the next `systemctl daemon-reload`", "; ".join(problems[:8]),
                    "run `sudo nvidia-ctk system create-dev-char-symlinks --create-all` and install NVIDIA's udev "
                    "rule so it runs whenever the driver binds (gpunode: the gpu-node playbook's dev_char_links "
                    "step, tag dev-char)")]


def _dkms(evidence: Evidence) -> list[Finding]:
    """No NVIDIA DKMS module installed for the running kernel: built for another one, or not built at all
    (fine when the driver comes from precompiled modules)."""
    if evidence.dkms_status is None or not evidence.running_kernel:
        return []
    kernel = evidence.running_kernel.strip()
    entries = [e for e in parse_dkms_status(evidence.dkms_status) if e.is_nvidia_driver]
    if any(e.kernel == kernel and e.state == "installed" for e in entries):
        return []
    works = _driver_works(evidence)
    built = [e for e in entries if e.kernel and e.state in ("installed", "built")]
    if built:
        return [_dkms_built_other_kernel(evidence, kernel, built, works)]
    if not entries and (works or _precompiled(evidence)):
        return []  # driver from precompiled modules: DKMS is simply not used
    return [_dkms_not_built(evidence, kernel, entries, works)]


def _next_boot(evidence: Evidence) -> list[Finding]:
    """The driver is DKMS-built, and the kernel the bootloader boots next (not the running one) has no module:
    the GPUs are gone after the next reboot (a kernel an unattended upgrade installed)."""
    following, running = evidence.next_boot_kernel, (evidence.running_kernel or "").strip()
    if evidence.dkms_status is None or not following or following == running or _guard_kept(evidence, following):
        return []  # (a boot default the kernel guard kept is said by kernel-guard-kept-default)
    entries = [e for e in parse_dkms_status(evidence.dkms_status) if e.is_nvidia_driver]
    if not entries or any(e.kernel == following and e.state == "installed" and not e.diverged for e in entries):
        return []
    shown = "; ".join(f"dkms status: {e.line!r}" for e in entries)
    headers = "" if evidence.next_boot_headers else f"; no headers installed for {following}"
    install = "" if evidence.next_boot_headers else f"install the headers of {following} (Debian/Ubuntu: " \
        f"linux-headers-{following}; EL: kernel-devel-{following}), then "
    return [Finding(
        "dkms-next-boot-kernel", "warning",
        f"the kernel the bootloader boots next ({following}) has no NVIDIA DKMS module: the GPUs are gone after "
        "the next reboot",
        f"{shown}; running kernel: {running}; newest installed kernel: {following}{headers}",
        f"Run gpunode provision with the gpu-node playbook (it plans the headers and the build for that kernel), or "
        f"{install}`dkms autoinstall -k {following}` and check `dkms status -k {following}` says installed. Hold "
        "the kernel packages (gpu-node's hold_kernel: true) so that upgrades come when you choose.")]


def _guard_record(evidence: Evidence) -> dict[str, str] | None:
    """The kernel guard's record of a kernel installed without its module, unless dkms now says installed for it."""
    record = evidence.kernel_guard
    if not record or not record.get("kernel"):
        return None
    kernel = record["kernel"]
    if any(e.kernel == kernel and e.state == "installed" and not e.diverged
           for e in parse_dkms_status(evidence.dkms_status or [])):
        return None  # built since, by hand (the guard releases the default at the next kernel hook run)
    return record


def _guard_kept(evidence: Evidence, kernel: str) -> bool:
    record = _guard_record(evidence)
    return bool(record and record["kernel"] == kernel and record.get("boot_default", "").startswith("kept"))


def _kernel_guard(evidence: Evidence) -> list[Finding]:
    """gpunode's kernel guard recorded a kernel installed without its DKMS module: the boot default kept at a kernel
    with the module (warning), or not (critical: the next reboot boots the kernel without it)."""
    record = _guard_record(evidence)
    if record is None:
        return []
    kernel, kept, missing = record["kernel"], record.get("kept", ""), record.get("missing", "the module")
    how = record.get("boot_default", "")
    shown = "; ".join(f"{k}={v}" for k, v in record.items()) + "; log: /var/log/gpunode-kernel-guard.log"
    fix = (f"Give kernel {kernel} its module: the module cache entry of its group (provision one host of the group "
           f"with module_cache on, then copy the entry where this node reads its cache), or its headers and a "
           f"compiler; then `dpkg --configure -a` (a failed DKMS build leaves the kernel package half-configured) or "
           f"`dkms autoinstall -k {kernel}`. The guard then makes the newest kernel the default again at the next "
           "kernel hook run; by hand: `grub-editenv /boot/grub/grubenv unset saved_entry`.")
    until = "grub-set-default"
    if record.get("loader") == "grubby":  # the dnf side's record (gpunode/modcache/guard_el.py)
        fix = (f"Give kernel {kernel} its module: the module cache entry of its group, or its headers "
               f"(kernel-devel-{kernel}) and a compiler; then `dkms autoinstall -k {kernel}`, and make it the boot "
               f"default: `grubby --set-default /boot/vmlinuz-{kernel}` (the guard does so itself when the kernel's "
               "plugins run again with the module there and UPDATEDEFAULT=yes).")
        until = "grubby --set-default"
    if how.startswith("kept"):
        return [Finding("kernel-guard-kept-default", "warning",
                        f"kernel {kernel} installed without its NVIDIA module ({missing}); boot default kept at {kept}",
                        shown, fix)]
    return [Finding("kernel-guard-default-not-kept", "critical",
                    f"kernel {kernel} installed without its NVIDIA module ({missing}); the boot default could not be "
                    f"kept ({how.removeprefix('unchanged: ') or 'unknown'}): the GPUs are gone after the next reboot",
                    shown, fix + f" Until then, choose the boot entry of a kernel with the module ({until}).")]


def _dkms_severity(works: bool) -> tuple[Severity, str]:
    """Critical unless nvidia-smi works, and the note that says why it works then."""
    if works:
        return "warning", "; nvidia-smi works, so the loaded module did not come from DKMS (prebuilt/precompiled)"
    return "critical", ""


def _dkms_built_other_kernel(evidence: Evidence, kernel: str, built: list[DkmsEntry],
                             works: bool) -> Finding:
    """The module is built (or installed) for other kernels only."""
    severity, loaded = _dkms_severity(works)
    others = sorted({e.kernel for e in built if e.kernel})
    return Finding(
        "dkms-built-other-kernel", severity,
        f"NVIDIA DKMS module is built for {', '.join(others)} but not for the running kernel {kernel}",
        "; ".join(f"dkms status: {e.line!r}" for e in built) + f"; running kernel: {kernel}{loaded}"
        + _headers_note(evidence),
        _built_other_remedy(evidence, kernel, others),
    )


def _dkms_not_built(evidence: Evidence, kernel: str, entries: list[DkmsEntry], works: bool) -> Finding:
    """The module is built for no kernel (added only, or not there at all)."""
    severity, loaded = _dkms_severity(works)
    shown = "; ".join(f"dkms status: {e.line!r}" for e in entries) or "dkms status lists no nvidia module"
    return Finding(
        "dkms-not-built", severity, f"no NVIDIA DKMS module installed for the running kernel {kernel}",
        f"{shown}; running kernel: {kernel}{loaded}" + _headers_note(evidence),
        _not_built_remedy(evidence, kernel),
    )


def _precompiled(evidence: Evidence) -> bool:
    """The running kernel has an nvidia module without DKMS: a precompiled modules package (Ubuntu
    linux-modules-nvidia-*, EL kmod-nvidia-*) or the module file itself (`modinfo -n nvidia`)."""
    return bool(evidence.precompiled_modules or evidence.running_module)


def _built_other_remedy(evidence: Evidence, kernel: str, others: list[str]) -> str:
    if _no_headers(evidence):
        return (f"Boot the kernel the module was built for ({', '.join(others)}); no headers package exists for the "
                f"running kernel {kernel}, so no module can be built for it (a vendor or self-built kernel needs its "
                "own headers).")
    return (f"Install headers for the running kernel (`apt-get install linux-headers-{kernel}` / `dnf install "
            f"kernel-devel-{kernel}`), then `dkms autoinstall -k {kernel}` and `modprobe nvidia`. Or boot the "
            f"kernel the module was built for ({', '.join(others)}).")


def _not_built_remedy(evidence: Evidence, kernel: str) -> str:
    if _no_headers(evidence):
        return (f"No headers package exists for the running kernel {kernel}: boot a distribution kernel that has "
                "headers (gpunode: kernel_policy: upgrade installs the newest with its headers and reboots), then "
                "install the driver's DKMS package there.")
    return (f"Install the kernel headers for {kernel} and the driver's DKMS package (e.g. nvidia-dkms-<branch>), "
            f"then `dkms autoinstall -k {kernel}`; read /var/lib/dkms/nvidia/*/build/make.log if the build fails.")


def _no_headers(evidence: Evidence) -> bool:
    """The package manager knows no headers package for the running kernel (checked on the host)."""
    return evidence.running_headers == "candidate (none)"


def _headers_note(evidence: Evidence) -> str:
    if _no_headers(evidence):
        return f"; apt knows no package linux-headers-{evidence.running_kernel}"
    return ""


def _nouveau(evidence: Evidence) -> list[Finding]:
    if not evidence.nouveau_loaded:
        return []
    works = _driver_works(evidence)
    return [Finding(
        "nouveau-loaded", "warning" if works else "critical", "the nouveau driver is loaded",
        "lsmod lists nouveau" + ("; nvidia-smi still works" if works else "; nvidia-smi does not work"),
        "Blacklist nouveau: write `blacklist nouveau` and `options nouveau modeset=0` to "
        "/etc/modprobe.d/blacklist-nouveau.conf, rebuild the initramfs (`update-initramfs -u` or `dracut "
        "-f`) and "
        "reboot.",
    )]


def _fabric_manager(evidence: Evidence) -> list[Finding]:
    """On an NVSwitch system: the fabric manager must run, and match the driver's version."""
    switches = evidence.nvswitches
    if not switches:
        return []
    seen = f"{len(switches)} NVSwitch(es) on PCI at {', '.join(s.slot for s in switches)}"
    return [*_fabric_manager_missing(evidence, seen), *_fabric_manager_mismatch(evidence, seen)]


def _fabric_manager_missing(evidence: Evidence, seen: str) -> list[Finding]:
    """The service is inactive, or its state is unknown and a GPU's fabric state is not completed."""
    fm = evidence.fabricmanager
    gpus = evidence.smi.gpus if evidence.smi else []
    gpu_states = sorted({g.fabric_state for g in gpus if g.fabric_state})
    not_ready = [s for s in gpu_states if s.lower() != "completed"]
    if not ((fm is not None and fm.active is False) or ((fm is None or fm.active is None) and not_ready)):
        return []
    state = "nvidia-fabricmanager is not active" if fm is not None and fm.active is False else \
        f"GPU fabric state {', '.join(not_ready)}"
    return [Finding(
        "fabricmanager-missing", "critical", "NVSwitch system without a running fabric manager",
        f"{seen}; {state}",
        "Install nvidia-fabricmanager of exactly the driver version (e.g. "
        "nvidia-fabricmanager-<branch>), "
        "then `systemctl enable --now nvidia-fabricmanager`; without it CUDA fails to initialise on "
        "NVSwitch "
        "systems. Check `journalctl -u nvidia-fabricmanager`.",
    )]


def _fabric_manager_mismatch(evidence: Evidence, seen: str) -> list[Finding]:
    """The fabric manager's version differs from the driver's."""
    fm = evidence.fabricmanager
    driver = evidence.smi.driver_version if evidence.smi else None
    if not (fm is not None and fm.version and driver and fm.version.strip() != driver):
        return []
    return [Finding(
        "fabricmanager-version-mismatch", "critical",
        f"fabric manager {fm.version} does not match driver {driver}",
        f"{seen}; nvidia-fabricmanager version {fm.version}; nvidia-smi Driver Version {driver}",
        "Fabric manager refuses to run with a different driver version: install nvidia-fabricmanager "
        f"{driver} (hold both packages together), then restart nvidia-fabricmanager.",
    )]


def _container(evidence: Evidence) -> list[Finding]:
    test = evidence.container_test
    if test is None:
        return []
    matches = [m for m in classify_errors(test.output) if m.context != "kernel"]
    findings = [Finding(m.id, m.severity, f"GPU container test: {m.summary}",
                        f"docker run exit code {test.exit_code}: "
                        f"{m.line[:400]!r}", m.remedy) for m in matches]
    if test.exit_code != 0 and not findings:
        tail = " | ".join(line.strip() for line in test.output.strip().splitlines()[-3:])
        findings.append(Finding(
            "container-gpu-test-failed", "critical", "the GPU container test failed",
            f"docker run exit code {test.exit_code}; last output: {tail[:400]!r}",
            "Run `docker run --rm --gpus all <cuda image> nvidia-smi` by hand and read the error; check "
            "`nvidia-ctk runtime configure --runtime=docker` was applied and docker restarted.",
        ))
    return findings
