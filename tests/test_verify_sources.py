"""Kernel logs (Xid), lspci and captured error outputs from real machines."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunode.parsers.errors_text import classify_errors
from gpunode.parsers.kernel_log import xid_info
from gpunode.verify import XID_MEANINGS, parse_lspci, scan_kernel_log

BUMBLEBEE = "dmesg__fallen-off-bus__old-format__Bumblebee-Project-Bumblebee-554.txt"
NO_DEVICES = "nvidia-smi__no-devices-were-found__NVIDIA-open-gpu-kernel-modules-862.txt"
FIXTURES = Path(__file__).resolve().parent / "data" / "nvidia"  # the shared fixtures, copied into the repository


def read(rel: str) -> str:
    """A capture of the corpus: one that is missing fails the test (it never skips)."""
    return (FIXTURES / rel).read_text(encoding="utf-8")


# Counted with `grep -o 'Xid (PCI:[^)]*): [0-9]*' FILE | sort | uniq -c`.
DMESG_EXPECTED = [
    ("dmesg/gpud__dmesg-with-xid-119.log", {119: 5}, {"0000:9b:00"}),
    ("dmesg/gpud__dmesg.decode.iso.log.0", {13: 629, 43: 7}, {"0000:38:00"}),
]


@pytest.mark.parametrize(("rel", "counts", "gpus"), DMESG_EXPECTED, ids=[r[0] for r in DMESG_EXPECTED])
def test_dmesg_xid_counts(rel: str, counts: dict[int, int], gpus: set[str]):
    scan = scan_kernel_log(read(rel))
    assert scan.xid_counts() == counts
    assert {event.pci for event in scan.xids} == gpus
    assert scan.lost == []


def test_xid_line_details_in_both_timestamp_formats():
    t_format = scan_kernel_log(read("dmesg/gpud__dmesg-with-xid-119.log")).xids
    assert t_format[0].timestamp == "Sun Feb 23 16:24:18 2025"
    assert (t_format[0].pid, t_format[0].process) == ("2024380", "nvidia-smi")
    assert t_format[0].message.startswith("Timeout after 6s of waiting for RPC response from GPU4 GSP!")
    assert t_format[-1].process == "gpud"
    iso = scan_kernel_log(read("dmesg/gpud__dmesg.decode.iso.log.0")).xids
    assert iso[0].timestamp == "2025-01-21T02:21:33,498559+00:00"
    assert (iso[0].pid, iso[0].process) == ("<unknown>", "<unknown>")
    xid43 = next(event for event in iso if event.code == 43)
    assert (xid43.pid, xid43.process, xid43.message) == ("2815167", "pt_main_thread", "Ch 00000008")


def test_kernel_log_other_formats():
    text = (
        "[ 5107.644336] NVRM: Xid (PCI:0000:03:00): 79, GPU has fallen off the bus.\n"
        "May 18 19:02:39 node kernel: NVRM: GPU 0000:2b:00.0: GPU has fallen off the bus.\n"
        "May  6 00:38:27 alex kernel: [ 4909.922970] NVRM: Xid (0000:01:00): 13, 0005 00000000 0000502d\n"
    )
    scan = scan_kernel_log(text)
    assert scan.xid_counts() == {79: 1, 13: 1}
    assert [event.pci for event in scan.lost] == ["0000:03:00", "0000:2b:00.0"]
    assert scan.xids[0].timestamp == "5107.644336" and scan.xids[1].timestamp == "May  6 00:38:27"


def test_fallen_off_bus_old_format():
    scan = scan_kernel_log(read(f"errors/{BUMBLEBEE}"))
    assert [event.pci for event in scan.lost] == ["0000:01:00.0", "0000:01:00.0"]
    assert scan.xids == []


def test_rm_init_adapter_failure():
    scan = scan_kernel_log(read(f"errors/{NO_DEVICES}"))
    assert [(e.pci, e.detail) for e in scan.init_failures] == [("0000:01:00.0", "0x22:0x56:884")]


def test_xid_table_covers_the_common_codes():
    common = {13, 31, 43, 45, 48, 61, 62, 63, 64, 68, 69, 74, 79, 92, 94, 95, 119, 120, 121, 140}
    assert common <= set(XID_MEANINGS)
    for code in common:
        info = XID_MEANINGS[code]
        assert info.name and info.meaning and info.remedy and info.severity in ("warning", "critical")
    assert XID_MEANINGS[79].name == "GPU has fallen off the bus" and XID_MEANINGS[79].severity == "critical"
    assert XID_MEANINGS[13].severity == "warning"  # application fault, GPU healthy
    assert "docs.nvidia.com" in xid_info(9999).remedy  # unknown codes point at the catalog


# file, NVIDIA GPUs (slot, device id), NVSwitches  -- read from the files
LSPCI_EXPECTED = [
    ("lspci/gpud__lspci.nn.a10", [("06:00.0", "2236")], 0),
    ("lspci/lspci-nn__A100-SXM4-40GB-and-80GB__easydiffusion-torchruntime-15.txt",
     [("07:00.0", "20b0"), ("07:00.0", "20b2")], 0),
    ("lspci/lspci-nn__H200-SXM-x8__easydiffusion-torchruntime-24.txt",
     [(slot, "2335") for slot in ("1b:00.0", "43:00.0", "52:00.0", "61:00.0", "9d:00.0", "c3:00.0", "d1:00.0",
                                  "df:00.0")], 0),
]


@pytest.mark.parametrize(("rel", "gpus", "switches"), LSPCI_EXPECTED, ids=[r[0] for r in LSPCI_EXPECTED])
def test_lspci_fixture(rel: str, gpus: list[tuple[str, str]], switches: int):
    devices = parse_lspci(read(rel))
    assert [(d.slot, d.device_id) for d in devices if not d.is_nvswitch] == gpus
    assert sum(d.is_nvswitch for d in devices) == switches


def test_lspci_classifies_nvswitch_and_skips_audio():
    text = read("lspci/lspci-nn__H200-SXM-x8__easydiffusion-torchruntime-24.txt") + (
        "07:00.0 Bridge [0680]: NVIDIA Corporation Device [10de:22a3] (rev a1)\n"
        "08:00.1 Audio device [0403]: NVIDIA Corporation TU102 High Definition Audio Controller "
        "[10de:10f7] (rev a1)\n"
    )
    devices = parse_lspci(text)
    assert [d.slot for d in devices if d.is_nvswitch] == ["07:00.0"]
    assert len(devices) == 9  # 8 GPUs + 1 NVSwitch; the audio function is not a GPU
    assert devices[0].description == "NVIDIA Corporation GH100 [H200 SXM 141GB]"


# Each captured error file and the finding id it must produce.
ERRORS_EXPECTED = [
    (BUMBLEBEE, "gpu-lost"),
    ("docker__could-not-select-device-driver__NVIDIA-nvidia-docker-1352.txt", "container-runtime-missing"),
    ("docker__nvidia-container-cli-nvml-driver-not-loaded__NVIDIA-nvidia-docker-1629.txt",
     "driver-not-loaded"),
    ("nvidia-smi__couldnt-communicate__GoogleCloudPlatform-compute-gpu-installation-33.txt",
     "driver-not-loaded"),
    ("nvidia-smi__couldnt-find-libnvidia-ml__projectbluefin-dakota-373.txt", "nvml-library-missing"),
    (NO_DEVICES, "no-devices-found"),
    ("nvidia-smi__nvml-driver-library-mismatch__illinois-scicomp-machine-shop-maintenance-60.txt",
     "driver-library-mismatch"),
    ("nvidia-smi__nvml-unknown-error-container__NVIDIA-nvidia-docker-1671.txt", "nvml-unknown-error"),
    ("nvidia-smi__unable-to-determine-device-handle__old-format-with-space__xxd3vin-workspace-19.txt",
     "nvml-unknown-error"),
]


@pytest.mark.parametrize(("name", "expected"), ERRORS_EXPECTED, ids=[r[0] for r in ERRORS_EXPECTED])
def test_error_signature(name: str, expected: str):
    matches = classify_errors(read(f"errors/{name}"))
    assert [m.id for m in matches] == [expected]
    assert matches[0].remedy and matches[0].line in read(f"errors/{name}")


def test_remedies_say_what_an_engineer_would_do():
    by_id = {m.id: m for m in classify_errors(
        "Failed to initialize NVML: Driver/library version mismatch\n"
        'docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].'
    )}
    mismatch = by_id["driver-library-mismatch"].remedy
    assert "Reboot" in mismatch and "hold" in mismatch and "unattended-upgrades" in mismatch
    runtime = by_id["container-runtime-missing"].remedy
    assert "nvidia-container-toolkit" in runtime
    assert "nvidia-ctk runtime configure --runtime=docker" in runtime
    assert "restart docker" in runtime
