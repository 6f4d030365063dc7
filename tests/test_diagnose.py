"""diagnose_files() and detect_kind() over the real captures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpunode.verify import Expectations, detect_kind, diagnose_files

FIXTURES = Path(__file__).resolve().parent / "data" / "nvidia"
H100_CAPTURE = "csv/linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01__"

def needs_fixtures(test):
    """The corpus is in the repository (tests/data): a missing capture fails the test, it never skips."""
    return test

# Every fixture file and what it is (decided by reading it).
KIND_EXPECTED = {
    f"{H100_CAPTURE}capabilities__L.txt": "smi-list",
    f"{H100_CAPTURE}capabilities__nvlink.txt": "unknown",  # nvidia-smi nvlink -s: not analysed
    f"{H100_CAPTURE}capabilities__topo.txt": "unknown",  # nvidia-smi topo -m
    f"{H100_CAPTURE}idle__computeapps.txt": "smi-csv",
    f"{H100_CAPTURE}idle__dmon.txt": "unknown",
    f"{H100_CAPTURE}idle__q.txt": "smi-text",
    f"{H100_CAPTURE}idle__querygpu.cmd": "unknown",  # the command line, not its output
    f"{H100_CAPTURE}idle__querygpu.txt": "smi-csv",
    f"{H100_CAPTURE}idle__retiredpages.txt": "smi-csv",
    f"{H100_CAPTURE}idle__table.txt": "smi-table",
    f"{H100_CAPTURE}load__computeapps.txt": "smi-csv",
    f"{H100_CAPTURE}load__dmon.txt": "unknown",
    f"{H100_CAPTURE}load__q.txt": "smi-text",
    f"{H100_CAPTURE}load__querygpu.cmd": "unknown",
    f"{H100_CAPTURE}load__querygpu.txt": "smi-csv",
    f"{H100_CAPTURE}load__retiredpages.txt": "smi-csv",
    f"{H100_CAPTURE}load__table.txt": "smi-table",
    "csv/nvidia_gpu_exporter__help-query-gpu.fields.txt": "unknown",
    "csv/nvidia_gpu_exporter__list_gpus.txt": "smi-list",
    "csv/nvidia_gpu_exporter__sample-output.csv": "smi-csv",
    "dmesg/gpud__dmesg-with-xid-119.log": "kernel-log",
    "dmesg/gpud__dmesg.decode.iso.log.0": "kernel-log",
    "errors/dmesg__fallen-off-bus__old-format__Bumblebee-Project-Bumblebee-554.txt": "kernel-log",
    "errors/docker__could-not-select-device-driver__NVIDIA-nvidia-docker-1352.txt": "error-text",
    "errors/docker__nvidia-container-cli-nvml-driver-not-loaded__NVIDIA-nvidia-docker-1629.txt": "error-text",
    "errors/nvidia-smi__couldnt-communicate__GoogleCloudPlatform-compute-gpu-installation-33.txt":
        "error-text",
    "errors/nvidia-smi__couldnt-find-libnvidia-ml__projectbluefin-dakota-373.txt": "error-text",
    "errors/nvidia-smi__no-devices-were-found__NVIDIA-open-gpu-kernel-modules-862.txt": "error-text",
    "errors/nvidia-smi__nvml-driver-library-mismatch__illinois-scicomp-machine-shop-maintenance-60.txt":
        "error-text",
    "errors/nvidia-smi__nvml-unknown-error-container__NVIDIA-nvidia-docker-1671.txt": "error-text",
    "errors/nvidia-smi__unable-to-determine-device-handle__old-format-with-space__xxd3vin-workspace-19.txt":
        "error-text",
    "lspci/gpud__lspci.nn.a10": "lspci",
    "lspci/lspci-nn__A100-SXM4-40GB-and-80GB__easydiffusion-torchruntime-15.txt": "lspci",
    "lspci/lspci-nn__H200-SXM-x8__easydiffusion-torchruntime-24.txt": "lspci",
    "table/gpud-e2e__NormalSMIOutput.A10.550.127.05.txt": "smi-table",
    "table/thamada-gls__H100SXMx8__nvidia-smi.txt": "smi-table",
    "table/thamada-gls__L4__nvidia-smi.txt": "smi-table",
    "table/thamada-gls__V100_x8__nvidia-smi.txt": "smi-table",
    "text_q/gpud-e2e__NormalQueryOutput.A10.550.127.05.txt": "smi-text",
    "text_q/gpud__nvidia-smi-query.535.161.08.out.0.valid": "smi-text",
    "text_q/gpud__nvidia-smi-query.535.183.01.out.0.invalid": "smi-text",
    "text_q/thamada-gls__A10__nvidia-smi-a.txt": "smi-text",
    "xml/e7d-prometheus-nvidiasmi__nvidia-smi.sample.440.95.01.xml": "smi-xml",
    "xml/guance-datakit__gtx-1card.xml": "smi-xml",
    "xml/microsoft-pai__nvidia_smi_sample_ecc_unsupported.xml": "smi-xml",
    "xml/telegraf__a100-sxm4-v12.xml": "smi-xml",
    "xml/telegraf__a10g.xml": "smi-xml",
    "xml/telegraf__dual_a5000-v13.xml": "smi-xml",
    "xml/telegraf__gtx-1660-ti.xml": "smi-xml",
    "xml/telegraf__quadro-p400.xml": "smi-xml",
    "xml/telegraf__rtx-3060-v12.xml": "smi-xml",
    "xml/telegraf__tesla-t4.xml": "smi-xml",
}


def fixture(rel: str) -> Path:
    path = FIXTURES / rel
    assert path.is_file(), f"capture {path} is missing from tests/data (restore it from git)"
    return path


@needs_fixtures
def test_kind_table_covers_every_fixture():
    on_disk = {str(p.relative_to(FIXTURES)) for p in FIXTURES.glob("*/*")
               if p.is_file() and p.parent.name != "mig"}  # mig/: listings for parsers/mig.py, not captures
    assert on_disk == set(KIND_EXPECTED)


@pytest.mark.parametrize(("rel", "kind"), sorted(KIND_EXPECTED.items()), ids=sorted(KIND_EXPECTED))
def test_detect_kind(rel: str, kind: str):
    assert detect_kind(fixture(rel).read_text(encoding="utf-8")) == kind


ERROR_FILES = {rel: kind for rel, kind in KIND_EXPECTED.items() if rel.startswith("errors/")}
ERROR_IDS = {
    "dmesg__fallen-off-bus": "gpu-lost",
    "docker__could-not-select-device-driver": "container-runtime-missing",
    "docker__nvidia-container-cli-nvml-driver-not-loaded": "driver-not-loaded",
    "nvidia-smi__couldnt-communicate": "driver-not-loaded",
    "nvidia-smi__couldnt-find-libnvidia-ml": "nvml-library-missing",
    "nvidia-smi__no-devices-were-found": "no-devices-found",
    "nvidia-smi__nvml-driver-library-mismatch": "driver-library-mismatch",
    "nvidia-smi__nvml-unknown-error-container": "nvml-unknown-error",
    "nvidia-smi__unable-to-determine-device-handle": "nvml-unknown-error",
}


@pytest.mark.parametrize("rel", sorted(ERROR_FILES), ids=sorted(ERROR_FILES))
def test_each_error_file_is_diagnosed(rel: str):
    expected = next(fid for prefix, fid in ERROR_IDS.items() if Path(rel).name.startswith(prefix))
    result = diagnose_files([fixture(rel)])
    assert [f.id for f in result.files[0].findings] == [expected]
    assert [f.id for f in result.findings] == [expected]
    finding = result.findings[0]
    assert finding.severity == "critical" and len(finding.remedy) > 40 and finding.evidence
    assert not result.healthy


def test_combined_analysis_across_files():
    paths = [fixture("xml/telegraf__tesla-t4.xml"),
             fixture("table/gpud-e2e__NormalSMIOutput.A10.550.127.05.txt"),
             fixture("dmesg/gpud__dmesg-with-xid-119.log"), fixture("lspci/gpud__lspci.nn.a10")]
    result = diagnose_files(paths, Expectations(expect_gpus=1))
    assert [f.kind for f in result.files] == ["smi-xml", "smi-table", "kernel-log", "lspci"]
    assert all(f.ok for f in result.files)
    ids = {f.id for f in result.findings}
    # The XML is the richest nvidia-smi report, so per-GPU checks use the T4; the log adds Xid 119.
    assert {"xid-119", "pcie-degraded", "persistence-mode-off"} <= ids
    assert "gpu-count-expected" not in ids and "gpu-count-mismatch" not in ids
    # the log's own words "The GPU likely needs to be reset." (NVRM's GSP RPC rate-limit line) are the catalogue's
    assert [f.id for f in result.files[2].findings] == ["xid-119", "gpu-reset-required"]
    assert result.files[3].findings == [] and result.files[3].message == "1 NVIDIA GPU(s), 0 NVSwitch(es)"


def test_unreadable_unknown_and_binary_files(tmp_path: Path):
    binary = tmp_path / "core.bin"
    binary.write_bytes(b"\x7fELF\x00\x00\x01")
    notes = tmp_path / "notes.txt"
    notes.write_text("the GPU seemed slow yesterday\n")
    broken = tmp_path / "smi.xml"
    broken.write_text('<?xml version="1.0" ?>\n<nvidia_smi_log>\n<driver_version>550.54.15</driver')
    result = diagnose_files([tmp_path / "missing.xml", binary, notes, broken])
    assert [(f.kind, f.ok) for f in result.files] == [("missing", False), ("unknown", False),
                                                      ("unknown", False), ("smi-xml", False)]
    assert "No such file" in result.files[0].message
    assert "not a recognised capture" in result.files[2].message
    assert "not well-formed XML" in result.files[3].message and "nvidia-smi -q -x" in result.files[3].message
    assert result.findings == [] and result.healthy is None and result.verdict == "unknown"
    assert "Result: UNKNOWN" in result.render_text() and "HEALTHY" not in result.render_text()
    assert "Traceback" not in result.render_text()


def test_a_missing_file_alone_is_named_as_missing_not_as_not_understood(tmp_path):
    """Trial of issue 29: `diagnose /no/such/file` ended with 'not understood: ... diagnose reads nvidia-smi -q -x /
    ...', as if the content were the problem."""
    result = diagnose_files([tmp_path / "missing.xml"])
    last = result.render_text().strip().splitlines()[-1]
    assert last.startswith("Result: UNKNOWN") and "missing.xml: cannot read file: No such file" in last
    assert "not understood" not in last and result.verdict == "unknown"


def test_json_and_text_rendering():
    result = diagnose_files([fixture("text_q/gpud__nvidia-smi-query.535.183.01.out.0.invalid"),
                             fixture("csv/" + Path(H100_CAPTURE).name + "load__computeapps.txt")])
    data = json.loads(json.dumps(result.to_dict()))
    first = data["files"][0]
    assert first["kind"] == "smi-text" and first["report"]["attached_gpus"] == 8
    assert len(first["report"]["gpus"]) == 1
    assert [f["id"] for f in data["findings"]] == ["smi-output-incomplete"]
    # one GPU section of eight: a partial capture is never called healthy, and the report names what is missing
    assert data["healthy"] is None and data["verdict"] == "unknown"
    assert first["partial"] == ["7 of 8 GPU section(s)"]
    assert "it lists no GPUs and is not used" in data["files"][1]["message"]
    text = result.render_text()
    assert "WARNING  smi-output-incomplete" in text and "Result: UNKNOWN (0 critical, 1 warning): partial" in text
    assert "7 of 8 GPU section(s)" in text and "Saw: 2 block(s)" in text


def test_one_lost_gpu_named_two_ways_counts_once(tmp_path: Path):
    # The driver names a GPU `0000:3b:00` in its Xid line and `0000:3b:00.0` in the line after it (found by a new
    # user's trial: it said 2 GPUs for one).
    log = tmp_path / "dmesg.log"
    log.write_text("[  100.1] NVRM: Xid (PCI:0000:3b:00): 79, pid=123, GPU has fallen off the bus.\n"
                   "[  100.2] NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.\n"
                   "[  100.3] NVRM: Xid (PCI:0000:86:00): 79, pid=1, GPU has fallen off the bus.\n")
    (lost,) = [f for f in diagnose_files([log], Expectations()).findings if f.id == "gpu-lost"]
    assert lost.summary.startswith("2 GPU(s)"), lost


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be"])
def test_a_powershell_utf16_capture_is_read(tmp_path: Path, encoding: str):
    # Trial of issues 26-28: Windows PowerShell 5's `nvidia-smi > smi.txt` (and Out-File) writes UTF-16 with a byte
    # order mark; diagnose called it a "binary file" (exit 2) although it reads Windows WDDM/TCC tables.
    capture = sorted((Path(__file__).resolve().parent / "data" / "captures" / "table").glob("*wddm*"))[0]
    clean = diagnose_files([capture])
    text = capture.read_text()
    saved = tmp_path / "smi.txt"
    saved.write_bytes((b"\xfe\xff" if encoding == "utf-16-be" else b"") + text.encode(encoding))
    result = diagnose_files([saved])
    assert result.files[0].kind == clean.files[0].kind == "smi-table"
    assert [f.id for f in result.findings] == [f.id for f in clean.findings] and result.verdict == clean.verdict
    assert len(result.combined.gpus) == len(clean.combined.gpus) == 1
    binary = tmp_path / "core.bin"  # a binary with NUL bytes everywhere is still no capture
    binary.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 4)
    assert diagnose_files([binary]).files[0].message.startswith("binary file")
