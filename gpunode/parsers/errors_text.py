"""Recognise captured error output of nvidia-smi, NVML and docker/nvidia-container-cli."""

from __future__ import annotations

import re
from typing import NamedTuple

from gpunode.distros import test_container_image
from gpunode.parsers.model import Severity
from gpunode.parsers.regex_needles import fold, needles, without_space


class ErrorSignature(NamedTuple):
    """A known error message and what an experienced GPU-cluster engineer does about it."""

    id: str
    pattern: re.Pattern[str]
    context: str  # "host" (nvidia-smi on the node), "container", or "kernel"
    summary: str
    remedy: str
    severity: Severity


class ErrorMatch(NamedTuple):
    """A signature found in a text, with the line that matched."""

    id: str
    context: str
    summary: str
    remedy: str
    severity: Severity
    line: str


_MISMATCH_REMEDY = (
    "The user-space driver (libnvidia-ml) was upgraded while the old kernel module is still loaded: compare "
    "`cat /proc/driver/nvidia/version` with the installed package. Reboot the node, or when no GPU process "
    "runs, "
    "stop nvidia-persistenced/nvidia-fabricmanager/dcgm and reload the modules (`rmmod nvidia_uvm nvidia_drm "
    "nvidia_modeset nvidia && modprobe nvidia`). Then hold the driver packages (`apt-mark hold` the "
    "nvidia/libnvidia packages, or `dnf versionlock`) and exclude them from unattended-upgrades so it "
    "cannot recur."
)
_NOT_LOADED_REMEDY = (
    "The nvidia kernel module is not loaded. Check `lsmod | grep nvidia` and `dmesg | grep -iE "
    "'nvrm|nvidia'`. "
    "Usual causes: the kernel was updated and the module was not built for it (install "
    "linux-headers-$(uname -r), run `dkms autoinstall`, check `dkms status`), Secure Boot rejects the "
    "unsigned "
    "module (`mokutil --sb-state`; enroll the DKMS key or use signed modules), or nouveau holds the GPU "
    "(blacklist it and rebuild the initramfs). Then `modprobe nvidia` and re-run nvidia-smi."
)

_RUNTIME_REMEDY = (
    "docker does not know the `nvidia` runtime: install nvidia-container-toolkit, run `sudo nvidia-ctk runtime "
    "configure --runtime=docker` (it writes the runtime into /etc/docker/daemon.json; rootless docker reads "
    "~/.config/docker/daemon.json), then `sudo systemctl restart docker` and check `docker info | grep -i "
    "runtimes` lists nvidia. Docker Desktop/WSL: enable the WSL2 backend instead."
)
_CDI_REMEDY = (
    "No CDI specification describes the requested device: run `sudo nvidia-ctk cdi generate "
    "--output=/etc/cdi/nvidia.yaml` (again after every driver upgrade, or enable the toolkit's "
    "nvidia-cdi-refresh service), check `nvidia-ctk cdi list` lists the name the runtime asks for (e.g. "
    "nvidia.com/gpu=all or management.nvidia.com/gpu=GPU-<uuid>), make the file readable, then retry."
)

_BUS_ID = r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?"  # nvidia-smi's PCI bus id

SIGNATURES: tuple[ErrorSignature, ...] = (
    ErrorSignature(
        "driver-not-loaded",
        re.compile(r"NVIDIA-SMI has failed because it couldn[\'‘’`´]?t communicate with the NVIDIA driver.*"),
        "host", "nvidia-smi cannot talk to the NVIDIA kernel driver", _NOT_LOADED_REMEDY, "critical"),
    ErrorSignature(
        "driver-not-loaded",
        re.compile(r"nvidia-container-cli: initialization error: nvml error: driver not loaded.*"),
        "container", "the container runtime found no loaded NVIDIA driver on the host",
        "The host driver is not loaded, so nvidia-container-cli cannot inject GPUs. Fix the host first: "
        + _NOT_LOADED_REMEDY + " Then restart the container.", "critical"),
    ErrorSignature(
        "driver-not-loaded",
        re.compile(r"Failed to initialize NVML: Driver Not Loaded.*|NVML: (?:ERROR_)?DRIVER_NOT_LOADED.*", re.I),
        "host", "NVML finds no loaded NVIDIA kernel driver", _NOT_LOADED_REMEDY, "critical"),
    ErrorSignature(
        "nvidia-no-adapter",
        re.compile(r"modprobe: ERROR: could not insert 'nvidia': No such device.*"),
        "host", "the nvidia module refuses to load: it finds no NVIDIA GPU it can drive",
        "The module found no supported GPU: check `lspci -nn | grep -i 10de` lists the GPU, `dmesg | grep NVRM` "
        "for 'not supported by the NVIDIA <version> driver release' (install a branch that supports the GPU) or "
        "'probe routine was not called' (nouveau or vfio-pci holds it).", "critical"),
    ErrorSignature(
        "dkms-not-built",
        re.compile(r"modprobe: FATAL: Module nvidia\S* not found in directory /lib/modules/\S+.*"),
        "host", "no nvidia kernel module exists for the running kernel",
        "The driver was built for another kernel (or not at all): install the headers for `uname -r` and the "
        "driver's DKMS package, run `dkms autoinstall -k $(uname -r)` and check `dkms status`, or boot the kernel the "
        "module was built for; prebuilt-module distributions need the linux-modules-nvidia package of this kernel.",
        "critical"),
    ErrorSignature(
        "container-cuda-requirement",
        re.compile(r"nvidia-container-cli: requirement error: unsatisfied condition: cuda ?>= ?\S+.*"),
        "container", "the container image needs a newer CUDA than the host driver supports",
        "The image's NVIDIA_REQUIRE_CUDA asks for a newer driver: upgrade the host driver to a branch that supports "
        "that CUDA version (see NVIDIA's CUDA/driver compatibility table), or use an image built for the host's "
        "CUDA version (`nvidia-smi` shows it); NVIDIA_DISABLE_REQUIRE=1 skips the check only when forward "
        "compatibility packages are in the image.", "critical"),
    ErrorSignature(
        "nvml-access-blocked",
        re.compile(r"Failed to initialize NVML: GPU access blocked by the operating system.*|"
                   r"WSL environment detected but no adapters were found.*", re.I),
        "container", "the OS gives NVML no GPU (WSL/Windows: no GPU-P adapter for this VM or container)",
        "Under WSL2 the GPU comes from the Windows driver: update the Windows NVIDIA driver and WSL (`wsl --update`), "
        "run `wsl --shutdown`, check `nvidia-smi` works inside WSL before docker, and do not install a Linux NVIDIA "
        "driver inside WSL. In a VM, check the GPU is passed through (or the vGPU licensed).", "critical"),
    ErrorSignature(
        "driver-library-mismatch",
        re.compile(r"Failed to initialize NVML: Driver/library version mismatch.*|nvml error: driver/library "
                   r"version mismatch.*", re.I),
        "host", "NVML library and loaded kernel module are different driver versions", _MISMATCH_REMEDY,
        "critical"),
    ErrorSignature(
        "driver-library-mismatch",
        re.compile(r"Mismatch in versions between nvidia-smi and NVML.*"),
        "host", "nvidia-smi and the NVML library it loaded are from different driver versions", _MISMATCH_REMEDY,
        "critical"),
    ErrorSignature(
        "nvidia-runtime-not-listed",
        re.compile(r"^ ?Runtimes:(?![^\n]*\bnvidia\b)[^\n]*\brunc\b[^\n]*$", re.M),
        "container", "`docker info` lists no nvidia runtime",
        "`--gpus` works through the toolkit's prestart hook, but `--runtime=nvidia`, compose files naming that "
        "runtime and Kubernetes (containerd/CRI-O) need it registered: " + _RUNTIME_REMEDY, "warning"),
    ErrorSignature(
        "driver-library-unlinkable",
        re.compile(r"ldconfig(?:\.real)?: Can't link \S*lib(?:nvidia-ml|cuda)\.so\.1 to \S+.*"),
        "container", "ldconfig cannot link the NVIDIA driver libraries (libnvidia-ml / libcuda): they are missing "
        "or broken where they were mounted",
        "The libraries the runtime or GPU manager mounted are absent or of another version than the links name: "
        "check the host driver version matches the mounted libnvidia-ml.so.<version> / libcuda.so.<version>, "
        "re-create the container after a driver upgrade (or regenerate the CDI spec: `nvidia-ctk cdi generate`), "
        "and check `ldconfig -p | grep -E 'libcuda|libnvidia-ml'` inside it.", "critical"),
    ErrorSignature(
        "nvml-library-missing",
        re.compile(r"NVIDIA-SMI couldn't find libnvidia-ml\.so library.*"),
        "host", "nvidia-smi cannot find libnvidia-ml.so (user-space driver missing)",
        "Install the user-space driver that matches the loaded kernel module (e.g. "
        "libnvidia-compute-<branch> "
        "and nvidia-utils-<branch>, or the distro's nvidia-driver package of the same version as "
        "/proc/driver/nvidia/version), run `ldconfig`, and check `ldconfig -p | grep libnvidia-ml`. Inside a "
        "container, start it with `--gpus all` (nvidia runtime) so the toolkit injects the libraries.",
        "critical"),
    ErrorSignature(
        "nvml-library-missing",
        re.compile(r"nvidia-container-cli: initialization error: load library failed: libnvidia-ml\.so.*|"
                   r"could not load NVML library: libnvidia-ml\.so\.1: cannot open shared object file.*|"
                   r"NVML: ERROR_LIBRARY_NOT_FOUND.*"),
        "container", "libnvidia-ml.so (NVML) cannot be loaded: on the host (nvidia-container-cli) or in a "
        "container/pod the driver libraries were not injected into (device plugin, exporter)",
        "Run `nvidia-smi` on the host: when it fails, install the NVIDIA driver user-space libraries matching "
        "the kernel module and run `ldconfig`. When it works, the container or pod did not get the driver "
        "libraries: configure the runtime (`sudo nvidia-ctk runtime configure --runtime=containerd` or "
        "`--runtime=docker`, restart it) or give the pod `runtimeClassName: nvidia`, then restart the "
        "container.", "critical"),
    ErrorSignature(
        "no-devices-found",
        # also as a script's `set -x` trace shows nvidia-smi's output captured into a variable
        re.compile(r"^\s*(?:\+ \w+=(?P<q>['\"]?))?No devices were found(?(q)(?P=q))\s*$", re.M),
        "host", "the driver is loaded but initialised no GPU",
        "Look at `dmesg | grep NVRM` for 'RmInitAdapter failed' or 'not supported' lines. Check the GPU is "
        "supported by the installed driver branch (new GPUs need a newer branch; Blackwell needs the open "
        "kernel modules), that the BIOS has Above 4G Decoding / Resizable BAR enabled for large-BAR GPUs, "
        "that "
        "`lspci -nn | grep 10de` lists the GPU, and in a VM that passthrough is configured. Reboot after "
        "fixing firmware settings.", "critical"),
    ErrorSignature(
        "nvml-unknown-error",
        re.compile(r"Unable to determine the device handle for GPU\s?[0-9A-Fa-f:.]+: Unknown Error.*"),
        "host", "NVML cannot get a handle for a GPU (GPU in a bad state)",
        "The GPU stopped responding: check `dmesg` for Xid 79/119/48 around the time. Drain the node, try "
        "`nvidia-smi -r -i <gpu>` (GPU reset), reboot if the reset fails, and RMA the GPU if it recurs.",
        "critical"),
    ErrorSignature(
        "gpu-lost",
        re.compile(r"Unable to determine the device handle for GPU\s?[0-9A-Fa-f:.]+: GPU is lost.*"),
        "host", "NVML reports the GPU as lost (it no longer answers on the PCIe bus)",
        "The GPU fell off the bus or hung hard: the message itself says to reboot (NVIDIA: RESTART_BM). Drain the "
        "node and reboot it; read `dmesg` for the Xid 79 / 'fallen off the bus' and PCIe AER lines before it, check "
        "power cabling and seating (riser), and RMA the GPU if it is lost again.", "critical"),
    ErrorSignature(
        "gpu-reset-required",
        re.compile(r"Unable to determine the device handle for GPU\s?[0-9A-Fa-f:.]+: GPU requires reset.*"),
        "host", "NVML reports that a GPU must be reset before it can be used",
        "Drain the GPU, reset it (`nvidia-smi -r -i <gpu>`, persistence mode off first) or reboot the node; look "
        "for the Xid that preceded it in `dmesg` and RMA the GPU if it recurs.", "critical"),
    ErrorSignature(
        "nvml-unknown-error",
        re.compile(r"Failed to initialize NVML: Unknown Error.*"),
        "container", "NVML fails with Unknown Error (often a container that lost its /dev/nvidia* access)",
        "On the host run nvidia-smi: if it works, the container lost device-cgroup access (typically after "
        "`systemctl daemon-reload` with the systemd cgroup driver). Restart the container; prevent it with "
        "`nvidia-ctk system create-dev-char-symlinks --create-all` (as a udev rule at boot) or by using CDI "
        "(`nvidia-ctk cdi generate`). If nvidia-smi also fails on the host, check dmesg for Xid errors and "
        "reset/reboot.", "critical"),
    ErrorSignature(
        "container-runtime-missing",
        re.compile(r"could not select device driver\s+(?:\"[^\"]*\"\s+|\S+\s+)?with capabilities:\s*\[\[gpu\]\].*"),
        "container", "docker has no GPU device driver: NVIDIA Container Toolkit missing or not configured",
        "Install nvidia-container-toolkit, run `sudo nvidia-ctk runtime configure --runtime=docker`, then "
        "`sudo systemctl restart docker` and test with "
        f"`docker run --rm --gpus all {test_container_image} nvidia-smi`.",
        "critical"),
    ErrorSignature(
        "container-cli-driver-timeout",
        re.compile(r"nvidia-container-cli: initialization error: (?:driver rpc error|driver error|nvcgo rpc error)"
                   r": (?:timed out|failed to process request)[^\n\\\"]*"),
        "container", "nvidia-container-cli timed out (or failed) talking to the driver while starting the container",
        "The driver is slow to initialise the GPUs for every new client: enable persistence mode (run "
        "nvidia-persistenced, or `nvidia-smi -pm 1`) so the driver stays initialised, check the host's "
        "`nvidia-smi` answers quickly and `dmesg` has no Xid, and retry; a loaded node (many containers starting "
        "at once) makes the 10 s RPC timeout of libnvidia-container more likely.", "critical"),
    ErrorSignature(
        "nvidia-runtime-not-registered",
        re.compile(r"unknown or invalid runtime name: nvidia.*|Unknown runtime specified nvidia.*", re.I),
        "container", "the container engine has no `nvidia` runtime registered", _RUNTIME_REMEDY, "critical"),
    ErrorSignature(
        "cdi-device-unresolvable",
        re.compile(r"unresolvable CDI devices? \S+.*", re.I),
        "container", "the container engine found no CDI spec for the requested NVIDIA device", _CDI_REMEDY,
        "critical"),
    ErrorSignature(
        "nvidia-smi-missing",
        re.compile(r"^(?:bash: |sh: \d+: |zsh: )?(?:command not found: nvidia-smi|nvidia-smi: (?:command )?not "
                   r"found)\s*$", re.M),
        "host", "nvidia-smi is not installed (no NVIDIA user-space driver)",
        "Install the NVIDIA driver (e.g. `gpunode provision` with the driver step, or the distribution's "
        "nvidia-driver/nvidia-utils package of the branch you need), reboot, and run nvidia-smi again.",
        "critical"),
    ErrorSignature(
        "mig-pending-reset",
        re.compile(rf"MIG mode is in pending (?:enable|disable) state for GPU\s*{_BUS_ID}[^\n]*"),
        "host", "a MIG mode change waits for a GPU reset (nvidia-smi -mig could not apply it)",
        "The mode is stored but takes effect only after a GPU reset: stop every client of the GPU "
        "(CUDA jobs, nvidia-persistenced, dcgm/nv-hostengine, nvsm, nvidia-fabricmanager, the device plugin; "
        "unload nvidia_drm if it is loaded), then `nvidia-smi -r -i <gpu>`; where the reset is not supported "
        "(`Not Supported`, GPU passthrough in a VM) reboot the node or VM.", "warning"),
    ErrorSignature(
        "gpu-reset-refused",
        re.compile(rf"GPU Reset couldn't run because GPU \S+ is the primary GPU[^\n]*|The following GPUs could "
                   rf"not be reset:[^\n]*|GPU {_BUS_ID}: In use by another client[^\n]*|GPU {_BUS_ID} is currently "
                   rf"in use by another process[^\n]*"),
        "host", "nvidia-smi refused to reset a GPU (it is in use, or it drives the console)",
        "A GPU reset needs the GPU idle: stop its clients (CUDA jobs, X/Wayland, nvidia-persistenced or "
        "`nvidia-smi -pm 0`, dcgm/nv-hostengine, nvidia-fabricmanager, monitoring agents, the k8s device "
        "plugin; unload nvidia_drm), list what holds it with `fuser -v /dev/nvidia*`, then retry "
        "`nvidia-smi -r -i <gpu>`. The primary (console) GPU cannot be reset while the system uses it: "
        "reboot instead.", "warning"),
    ErrorSignature(
        "nvidia-smi-missing",
        re.compile(r"exec: \\?\"nvidia-smi\\?\": executable file not found in \$PATH[^\n]*"),
        "container", "the container has no nvidia-smi: the NVIDIA runtime did not inject the driver utilities",
        "nvidia-smi comes from the host driver, mounted by the NVIDIA Container Toolkit: start the container "
        "with `--gpus all` (or `--runtime=nvidia -e NVIDIA_VISIBLE_DEVICES=all -e "
        "NVIDIA_DRIVER_CAPABILITIES=compute,utility`), check `docker info | grep -i runtimes` lists nvidia "
        "(else `sudo nvidia-ctk runtime configure --runtime=docker` and restart docker), and that `nvidia-smi` "
        "works on the host.", "critical"),
    ErrorSignature(
        "inforom-corrupted",
        re.compile(r"WARNING: infoROM is corrupted at gpu\s+\S+[^\n]*"),
        "host", "nvidia-smi reports a corrupted infoROM (exit code 14)",
        "The GPU still works, but ECC page retirement / row-remap records cannot be trusted or stored. Open "
        "a case with the vendor to reflash the InfoROM or RMA the board; automation that treats nvidia-smi's "
        "exit code 14 as a failure (GPU Operator's driver validation) stops until then.", "warning"),
    ErrorSignature(
        "gpu-lost",
        re.compile(r"(?:GPU has fallen off the bus|has fallen off the bus).*"),
        "kernel", "a GPU has fallen off the PCIe bus",
        "Reboot the node (NVIDIA: RESTART_BM). Review `dmesg`/BMC event logs for PCIe AER errors, reseat the "
        "GPU/riser and check power cabling; RMA the GPU if it recurs.", "critical"),
)


_LOOSE: dict[str, re.Pattern[str]] = {}
_NEEDLES: dict[re.Pattern[str], tuple[str, ...]] = {}  # pattern -> words one of which it needs ("" when none derived)


def _loose(pattern: re.Pattern[str]) -> re.Pattern[str]:
    """pattern with every literal space made optional whitespace (spaces lost or doubled, lines wrapped)."""
    loose = _LOOSE.get(pattern.pattern)
    if loose is None:
        loose = _LOOSE[pattern.pattern] = re.compile(re.sub(r"(?<!\\) +(?![^\[]*\])", r"\\s*", pattern.pattern),
                                                     pattern.flags)
    return loose


def _search(pattern: re.Pattern[str], text: str, folded: str, spaceless: bool = False) -> re.Match[str] | None:
    """pattern.search(text), skipped when folded (fold(text), without_space() of it when spaceless) lacks every
    word the pattern needs."""
    words = _NEEDLES.get(pattern)
    if words is None:
        words = _NEEDLES[pattern] = needles(pattern, spaceless) or ("",)
    return pattern.search(text) if any(word in folded for word in words) else None


def classify_errors(text: str) -> list[ErrorMatch]:
    """Every known error signature in text (first matching line each), in SIGNATURES order; the stable words of
    a message are matched even when its spaces were lost or doubled or its lines wrapped."""
    found: list[ErrorMatch] = []
    joined = re.sub(r"[ \t]*\n[ \t]*", " ", text)  # messages wrapped over lines by the terminal or the poster
    folded, spaceless = fold(text), without_space(fold(joined))
    for signature in SIGNATURES:
        match = _search(signature.pattern, text, folded)
        if match is None:
            match = _search(_loose(signature.pattern), joined, spaceless, spaceless=True)
            if match:
                found.append(ErrorMatch(signature.id, signature.context, signature.summary, signature.remedy,
                                        signature.severity, match.group(0)[:400]))
                continue
        if match:
            line = _line_of(text, match.start())
            found.append(ErrorMatch(signature.id, signature.context, signature.summary, signature.remedy,
                                    signature.severity, line))
    return found + catalogue_errors(text, found)


def catalogue_errors(text: str, known: list[ErrorMatch]) -> list[ErrorMatch]:
    """The first line of text each message-catalogue entry about NVIDIA's stack (not of the kernel) reads, where no
    hand signature in known already read that line (one finding per line); other vendors' entries never give a
    match here (catalogs.messages.nvidia_matches)."""
    from gpunode.parsers.catalogs.messages import nvidia_matches  # the catalogue is read on first use

    taken = [match.line for match in known]
    found: dict[tuple[str, int], ErrorMatch] = {}
    for entry, line in nvidia_matches(text):
        if entry.context == "kernel" or (entry.file, entry.index) in found or any(
                line in other or other in line for other in taken):
            continue
        fix = entry.fix or inherited_fix(entry.finding)
        found[(entry.file, entry.index)] = ErrorMatch(entry.finding, entry.context, entry.summary, fix,
                                                      SEVERITY[entry.severity], line[:400])
    return list(found.values())


SEVERITY: dict[str, Severity] = {"critical": "critical", "warning": "warning", "info": "ok"}  # catalogue -> finding


def inherited_fix(finding_id: str) -> str:
    """The fix of the hand-written signature or kernel condition of that id, else of the first catalogue entry of
    that finding that has its own ("" when none has one)."""
    from gpunode.parsers.catalogs.kernel_conditions import CONDITIONS
    from gpunode.parsers.catalogs.messages import load_catalogue

    hand = next((entry.remedy for entry in SIGNATURES if entry.id == finding_id), "") or next(
        (condition.remedy for condition in CONDITIONS if condition.id == finding_id), "")
    return hand or next((entry.fix for entry in load_catalogue() if entry.finding == finding_id and entry.fix), "")


def has_user_space_error(text: str) -> bool:
    """True if text holds an nvidia-smi / NVML / docker error (kernel-only messages excluded)."""
    return any(match.context != "kernel" for match in classify_errors(text))


def _line_of(text: str, position: int) -> str:
    start = text.rfind("\n", 0, position) + 1
    end = text.find("\n", position)
    return text[start:end if end != -1 else len(text)].strip()
