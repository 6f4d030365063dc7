"""Issue 39: evidence is NVIDIA's only when it says so; mixed captures read whole; every kernel-log stamp form.

Each capture below is real (tests/data/captures/SOURCES.md names its thread) and was read differently before this
change: AMD, Intel and CPU-only logs were HEALTHY (exit 0) or not understood, a failed fabric manager beside a table
was dropped, and `nvidia-smi nvlink -s` link states were not read.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunode.commands.verify_cmd import diagnose
from gpunode.parsers.kernel_lines import kernel_messages
from gpunode.parsers.kernel_log import has_kernel_markers, scan_kernel_log
from gpunode.parsers.smi_nvlink import nvlink_findings, parse_nvlink
from gpunode.parsers.vendor_lines import line_vendor
from gpunode.verify import Expectations, diagnose_files
from gpunode.verify.captures.units import failed_units

CAPTURES = Path(__file__).resolve().parent / "data" / "captures"

# capture -> the vendor whose messages it holds (never NVIDIA's): verdict not-nvidia, exit 2
NOT_NVIDIA = {
    "kernel/pop-os-cosmic-epoch-3764__amdgpu-ring-gfx-timeout-vram-lost-dmesg.txt": "amd",
    "kernel/pop-os-cosmic-comp-2626__amdgpu-ring-timeout-journal-vram-lost.txt": "amd",
    "kernel/wayvr-org-wayvr-650__amdgpu-ring-timeout-mode1-no-timestamps.txt": "amd",
    "kernel/ValveSoftware-SteamOS-2802__amdgpu-mes-reset-failed-dmesg-T.txt": "amd",
    "kernel/tomsom-yoga-linux-38__amdgpu-sdma0-timeout-mode2-reset.txt": "amd",
    "kernel/pop-os-pop-2132__amdgpu-ring-timeout-syslog-mode1.txt": "amd",
    "kernel/freebsd-drm-kmod-387__amdgpu-ring-timeout-freebsd-drmn0.txt": "amd",
    "kernel/ggml-org-llama.cpp-21724__amdgpu-ring-reset-journal-polish-month.txt": "amd",
    "other/ROCm-rocm_smi_lib-35__rocm-smi-concise-2gpu.txt": "amd",
    "other/ROCm-legacy-rocm-build-558__rocm-smi-table-and-perf-level.txt": "amd",
    "other/wandb-wandb-5449__rocm-smi-concise-8gpu-mi250-prefixed.txt": "amd",
    "kernel/NsCDE-NsCDE-157__i915-gpu-hang-heartbeat-dmesg.txt": "intel",
    "kernel/clearlinux-distribution-2907__i915-gpu-hang-guc-reset-failed.txt": "intel",
    "kernel/intel-libva-320__i915-gpu-hang-one-line.txt": "intel",
    "kernel/FreeBSDDesktop-DEPRECATED-freebsd-base-graphics-2__i915-gpu-hang-ring-hung-drm.txt": "intel",
    "kernel/intel-libva-113__i915-gpu-hang-render-ring-dmesg-T-chinese.txt": "intel",
    "other/intel-xpumanager-69__xpu-smi-dump-flex-170.txt": "intel",
    "other/intel-xpumanager-98__xpu-smi-dump-max-1550.txt": "intel",
    "kernel/radiasoft-devops-134__mce-edac-sbridge-memory-error-syslog.txt": "other",
    "kernel/illinois-scicomp-machine-shop-maintenance-66__edac-ce-memory-read-error-dmesg-T.txt": "other",
    "kernel/openstreetmap-operations-300__mce-edac-ce-errors-syslog.txt": "other",
    "kernel/linux-nvme-nvme-cli-151__nvme-qid-timeout-removed-dmesg.txt": "other",
    "kernel/raspberrypi-linux-6661__nvme-controller-down-journal.txt": "other",
    "kernel/csrutil-OpenWrt-NIC-Drivers-11__r8125-netdev-watchdog-dmesg.txt": "other",
    "kernel/openwrt-openwrt-19765__mtk-eth-netdev-watchdog-logread.txt": "other",
}

# capture -> (verdict, {finding id: severity}) for captures read whole: units beside tables, nvlink states
READ_WHOLE = {
    "multi/NVIDIA-gpu-operator-356__fabricmanager-job-failed-and-table-510-geforce.txt": (
        "healthy", {"fabricmanager-no-nvswitch": "warning"}),
    "other/NVIDIA-nvtrust-128__fabricmanager-job-failed-and-journal-nvswitch.txt": (
        "unhealthy", {"fabricmanager-failed": "critical"}),
    "other/mrzenc-vgpu4nixos-4__nvidia-vgpu-mgr-failed-status-and-journal.txt": (
        "unhealthy", {"unit-failed": "critical"}),
    "other/getsolus-packages-317__nvidia-powerd-failed-status-italian-month.txt": (
        "healthy", {"unit-failed": "warning"}),
    "nvlink/Azure-azhpc-diagnostics-73__nvlink-s-v100-sxm2-inactive-links.txt": (
        "unhealthy", {"nvlink-down": "critical"}),
}


@pytest.mark.parametrize("rel", sorted(NOT_NVIDIA))
def test_other_vendors_logs_are_not_nvidia_evidence(rel: str, capsys: pytest.CaptureFixture[str]):
    result = diagnose_files([CAPTURES / rel])
    assert result.verdict == "not-nvidia", result.render_text()
    assert result.findings == []
    assert sum(f.nvidia_lines for f in result.files) == 0
    assert any(f"({NOT_NVIDIA[rel]})" in what for what in result.not_nvidia)
    assert diagnose([str(CAPTURES / rel)], False, Expectations()) == 2
    out = capsys.readouterr().out
    assert "this is not about an NVIDIA GPU" in out and "e.g. " in out


@pytest.mark.parametrize("rel", sorted(READ_WHOLE))
def test_mixed_captures_are_read_whole(rel: str):
    verdict, wanted = READ_WHOLE[rel]
    result = diagnose_files([CAPTURES / rel])
    assert result.verdict == verdict, result.render_text()
    got = {f.id: f.severity for f in result.findings}
    assert {k: got.get(k) for k in wanted} == wanted, result.render_text()


def test_an_nvidia_log_beside_an_amd_one_is_read_as_nvidia():
    """Both vendors in one input: the NVIDIA file is judged, the AMD lines stay out of it."""
    amd = CAPTURES / "kernel/pop-os-cosmic-epoch-3764__amdgpu-ring-gfx-timeout-vram-lost-dmesg.txt"
    xid = CAPTURES / "kernel/wilicc-gpu-burn-1__aer-surprise-down-then-xid-79.txt"
    result = diagnose_files([amd, xid])
    assert result.verdict == "unhealthy"
    assert "gpu-lost" in {f.id for f in result.findings}


@pytest.mark.parametrize(("line", "vendor"), [
    ("[  312.522692] amdgpu 0000:28:00.0: ring gfx_0.0.0 timeout, signaled seq=57638, emitted seq=57641", "amd"),
    ("drmn0: GPU reset begin!", "amd"),  # amdgpu's words under FreeBSD's device name
    ("[drm] VRAM is lost due to GPU reset!", "amd"),
    ("i915 0000:00:02.0: [drm] GPU HANG: ecode 4:1:9fe7fbfd, in Xorg [996]", "intel"),
    ("EDAC MC0: 4 CE error on CPU#0Channel#2_DIMM#0 (channel:2 slot:0 page:0x0 offset:0x0 grain:8)", "other"),
    ("nvme nvme0: I/O 24 QID 3 timeout, aborting", "other"),
    ("NETDEV WATCHDOG: eth0 (igb): transmit queue 0 timed out", "other"),
    ("NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.", "nvidia"),
    ("[drm] Initialized nvidia-drm 0.0.0 20160202 for 0000:01:00.0 on minor 1", "nvidia"),
    ("nvidia-modeset: ERROR: GPU:0: Idling display engine timed out", "nvidia"),
    ("pcieport 0000:00:01.0: AER: Corrected error received: 0000:00:01.0", None),
    ("GPU reset", None),  # the words alone say nothing about whose GPU
])
def test_whose_line_it_is(line: str, vendor: str | None):
    assert line_vendor(line).vendor == vendor


def test_aer_lines_of_an_amd_gpu_are_not_read_as_a_gpu_fault():
    """The AER lines name the device amdgpu drives (its own line, and the root port's naming its address)."""
    amd = ("[ 10.000000] amdgpu 0000:03:00.0: PCIe Bus Error: severity=Uncorrected (Non-Fatal), type=Transaction "
           "Layer, (Requester ID)\n")
    port = "[ 10.000001] pcieport 0000:00:01.1: AER: Uncorrected (Non-Fatal) error received: 0000:03:00.0\n"
    assert scan_kernel_log(amd + port).conditions == []
    assert [c.id for c, _ in scan_kernel_log(port).conditions] == ["pcie-aer-uncorrectable"]


# util-linux sys-utils/dmesg.c @ 39465c780eed56034ed1440068a2722fc3331343 (lines cited in kernel_lines.py)
@pytest.mark.parametrize(("line", "stamp"), [
    ("[Nov28 00:01] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.", "Nov28 00:01"),  # -H minute
    ("[Nov 8 00:01] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.", "Nov 8 00:01"),  # %b%e, day < 10
    ("[  +0.000844] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.", "+0.000844"),  # -H delta
    ("[ +12.000844] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.", "+12.000844"),  # %+9.06f
    ("[Sat Nov 28 00:01:02 2026] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.",
     "Sat Nov 28 00:01:02 2026"),  # --ctime
    ("[Sat Nov 28 00:01:02 2026 <    0.000012>] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.",
     "Sat Nov 28 00:01:02 2026"),  # --time-format ctime,delta
    ("[    5.000000 <    0.000012>] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.", "5.000000"),
    ("[<    0.000012>] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.", "0.000012"),  # -d only
    ("[    5.000000] [T1234] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.", "5.000000"),  # caller
])
def test_every_dmesg_stamp_form(line: str, stamp: str):
    assert has_kernel_markers(line)
    (message,) = kernel_messages(line)
    assert (message.timestamp, message.text[:5]) == (stamp, "NVRM:")
    assert scan_kernel_log(line).xid_counts() == {79: 1}


def test_a_dmesg_h_continuation_is_joined_only_at_zero_delta():
    text = ("[Nov28 00:01] NVRM: A GPU crash dump has been created. If possible, please run\n"
            "[  +0.000000] NVRM: nvidia-bug-report.sh as root to collect this data before\n"
            "[  +0.000001] NVRM: the NVIDIA kernel module is unloaded.\n")
    assert [m.text[:40] for m in kernel_messages(text)] == [
        "NVRM: A GPU crash dump has been created.", "NVRM: the NVIDIA kernel module is unload"]


def test_failed_units_in_systemd_s_words():
    text = ("Job for nvidia-fabricmanager.service failed because the control process exited with error code.\n"
            "Nov 28 00:01:02 h systemd[1]: nvidia-persistenced.service: Failed with result 'exit-code'.\n"
            "Nov 28 00:01:02 h systemd[1]: Failed to start NVIDIA DCGM service.\n"
            "Nov 28 00:01:02 h systemd[1]: docker.service: Main process exited, code=exited, status=1/FAILURE\n"
            "Nov 28 00:01:02 h systemd[1]: Failed to start ssh.service - OpenBSD Secure Shell server.\n")
    assert [u.unit for u in failed_units(text)] == [
        "nvidia-fabricmanager.service", "nvidia-persistenced.service", "nvidia-dcgm.service", "docker.service"]


def test_nvlink_inactive_links_count_only_where_nvlink_is_wired():
    text = ("GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-5269b708-678a-b1a8-60f0-c90406537486)\n"
            "\t Link 0: 25 GB/s\n\t Link 1: <inactive>\n"
            "GPU 1: NVIDIA GeForce RTX 3090 (UUID: GPU-a7605225-d684-1f65-4ad4-ee2ab39338b4)\n"
            "\t Link 0: <inactive>\n\t Link 1: <inactive>\n"
            "GPU 2: NVIDIA RTX A6000 (UUID: GPU-b7605225-d684-1f65-4ad4-ee2ab39338b4)\n"
            "\t Link 0: 14.062 GB/s\n\t Link 1: <inactive>\n")
    found = {(f.gpu, f.severity) for f in nvlink_findings(parse_nvlink(text))}
    assert found == {("GPU-5269b708-678a-b1a8-60f0-c90406537486", "critical"),
                     ("GPU-b7605225-d684-1f65-4ad4-ee2ab39338b4", "warning")}


def test_nvlink_error_counters_are_read():
    text = (CAPTURES / "nvlink/stas00-ml-engineering__nvlink-e-h100-elided-prompt.txt").read_text()
    gpus = parse_nvlink(text)
    assert gpus and gpus[0].errors[17] == {"Replay": 0, "Recovery": 0, "CRC": 0}
    assert nvlink_findings(gpus) == []
