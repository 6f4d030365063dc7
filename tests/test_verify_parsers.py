"""nvidia-smi parsers (XML, -q text, table, --query-gpu CSV, -L) against real captures.

Expected values were written by reading each fixture file (and SOURCES.md), not computed by the parsers.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunode.verify import (
    SmiParseError,
    parse_smi_csv,
    parse_smi_list,
    parse_smi_table,
    parse_smi_text,
    parse_smi_xml,
)

FIXTURES = Path(__file__).resolve().parent / "data" / "nvidia"


def read(rel: str) -> str:
    path = FIXTURES / rel
    if not path.is_file():
        pytest.fail(f"capture {path} is missing from tests/data (restore it from git)")
    return path.read_text(encoding="utf-8")


H100 = "NVIDIA H100 80GB HBM3"
H100_CAPTURE = "csv/linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01__"

# file, driver, cuda, attached_gpus, product names (one per <gpu>), DTD version
XML_EXPECTED = [
    ("e7d-prometheus-nvidiasmi__nvidia-smi.sample.440.95.01.xml", "440.95.01", "10.2", 1,
     ["GeForce GTX 980"], 10),
    ("guance-datakit__gtx-1card.xml", "460.39", "11.2", 1, ["Tesla V100-PCIE-32GB"], 11),
    ("microsoft-pai__nvidia_smi_sample_ecc_unsupported.xml", "410.73", "10.0", 2,
     ["GeForce RTX 2080 Ti", "GeForce RTX 2080 Ti"], 10),
    ("telegraf__a100-sxm4-v12.xml", "535.54.03", "12.2", 4, ["NVIDIA A100-SXM4-80GB"], 12),
    ("telegraf__a10g.xml", "515.105.01", "11.7", 1, ["NVIDIA A10G"], 11),
    ("telegraf__dual_a5000-v13.xml", "590.44.01", "13.1", 2, ["NVIDIA RTX A5000", "NVIDIA RTX A5000"], 13),
    ("telegraf__gtx-1660-ti.xml", "418.43", "10.1", 1, ["Graphics Device"], None),
    ("telegraf__quadro-p400.xml", "418.43", "10.1", 1, ["Quadro P400"], None),
    ("telegraf__rtx-3060-v12.xml", "570.124.04", "12.8", 1, ["NVIDIA GeForce RTX 3060"], 12),
    ("telegraf__tesla-t4.xml", "515.105.01", "11.7", 1, ["Tesla T4"], 11),
]


@pytest.mark.parametrize(("name", "driver", "cuda", "attached", "products", "dtd"), XML_EXPECTED,
                         ids=[row[0] for row in XML_EXPECTED])
def test_xml_fixture(name: str, driver: str, cuda: str, attached: int, products: list[str], dtd: int | None):
    report = parse_smi_xml(read(f"xml/{name}"))
    assert report.source_kind == "xml"
    assert (report.driver_version, report.cuda_version, report.attached_gpus) == (driver, cuda, attached)
    assert [gpu.name for gpu in report.gpus] == products
    assert report.schema_version == dtd
    assert all(gpu.driver_version == driver and gpu.cuda_version == cuda for gpu in report.gpus)
    assert all(gpu.uuid and gpu.uuid.startswith("GPU-") for gpu in report.gpus)


def test_xml_values_old_and_new_layouts():
    a100 = parse_smi_xml(read("xml/telegraf__a100-sxm4-v12.xml"))
    gpu = a100.gpus[0]
    assert (gpu.memory_total_mib, gpu.memory_used_mib, gpu.temperature_c) == (81920, 50, 27)
    assert (gpu.power_draw_w, gpu.power_limit_w) == (67.03, 500.0)  # gpu_power_readings (v12)
    assert gpu.persistence_mode is False and gpu.ecc_mode is True
    assert (gpu.ecc_uncorrectable_volatile, gpu.ecc_uncorrectable_aggregate) == (0, 0)
    assert gpu.remapped_rows_pending is None  # <remapped_rows>N/A</remapped_rows>
    assert a100.warnings == ["attached_gpus is 4 but the XML holds 1 <gpu> element(s)"]

    t4 = parse_smi_xml(read("xml/telegraf__tesla-t4.xml")).gpus[0]
    assert (t4.pcie_gen_current, t4.pcie_gen_max, t4.pcie_width_current, t4.pcie_width_max) == (3, 3, 8, 16)
    assert (t4.power_draw_w, t4.power_limit_w) == (26.78, 70.0)  # power_readings (v11)
    assert t4.retired_pages_pending is False and t4.throttle_reasons_active == []

    a5000 = parse_smi_xml(read("xml/telegraf__dual_a5000-v13.xml")).gpus
    assert [g.power_draw_w for g in a5000] == [6.41, 13.6]  # average_power_draw (570+)
    assert [g.persistence_mode for g in a5000] == [True, True]
    assert a5000[0].ecc_mode is False and a5000[0].ecc_uncorrectable_volatile is None
    assert a5000[0].remapped_rows_pending is False and a5000[0].remapped_rows_failure is False
    assert a5000[1].pci_bus_id == "00000000:C1:00.0"
    assert a5000[0].throttle_reasons_active == ["gpu_idle"]  # clocks_event_reasons (v12+)

    v100 = parse_smi_xml(read("xml/guance-datakit__gtx-1card.xml")).gpus[0]
    assert v100.ecc_mode is True and v100.ecc_uncorrectable_volatile == 0  # single_bit/double_bit layout
    assert v100.utilization_gpu_pct == 91

    p400 = parse_smi_xml(read("xml/telegraf__quadro-p400.xml")).gpus[0]
    assert p400.power_draw_w is None and p400.power_limit_w is None  # N/A


def test_xml_mig_devices_counted_on_a100():
    gpu = parse_smi_xml(read("xml/telegraf__a100-sxm4-v12.xml")).gpus[0]
    assert gpu.mig_mode_current is True and gpu.mig_mode_pending is True
    assert gpu.mig_devices == 4
    assert gpu.utilization_gpu_pct is None  # N/A under MIG


def test_xml_ecc_unsupported_values_are_none():
    report = parse_smi_xml(read("xml/microsoft-pai__nvidia_smi_sample_ecc_unsupported.xml"))
    for gpu in report.gpus:
        assert gpu.ecc_mode is None
        assert gpu.ecc_uncorrectable_volatile is None and gpu.ecc_uncorrectable_aggregate is None
        assert gpu.retired_pages_pending is None
    assert [g.throttle_reasons_active for g in report.gpus] == [["gpu_idle"], ["sw_power_cap"]]
    assert [(g.pcie_gen_current, g.pcie_gen_max) for g in report.gpus] == [(1, 3), (1, 3)]


V9_SYNTHETIC = """<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v9.dtd">
<nvidia_smi_log>
\t<driver_version>384.81</driver_version>
\t<attached_gpus>1</attached_gpus>
\t<gpu id="0000:04:00.0">
\t\t<product_name>Tesla K80</product_name>
\t\t<persistence_mode>Enabled</persistence_mode>
\t\t<uuid>GPU-11111111-2222-3333-4444-555555555555</uuid>
\t\t<fan_speed>Unknown Error</fan_speed>
\t\t<ecc_mode><current_ecc>Enabled</current_ecc><pending_ecc>Enabled</pending_ecc></ecc_mode>
\t\t<ecc_errors>
\t\t\t<volatile>
\t\t\t\t<single_bit><device_memory>5</device_memory><total>5</total></single_bit>
\t\t\t\t<double_bit><device_memory>2</device_memory><register_file>1</register_file><total>3</total></double_bit>
\t\t\t</volatile>
\t\t\t<aggregate>
\t\t\t\t<double_bit><device_memory>2</device_memory><register_file>1</register_file><total>N/A</total></double_bit>
\t\t\t</aggregate>
\t\t</ecc_errors>
\t\t<retired_pages>
\t\t\t<pending_blacklist>Yes</pending_blacklist>
\t\t</retired_pages>
\t\t<power_readings>
\t\t\t<power_draw>[Unknown Error]</power_draw><power_limit>149.00 W</power_limit>
\t\t</power_readings>
\t</gpu>
</nvidia_smi_log>
"""


def test_xml_v9_layout_without_cuda_version():
    """Hand-written v9-style capture (no <cuda_version>, 4-hex domain, old ECC layout, error values)."""
    report = parse_smi_xml(V9_SYNTHETIC)
    assert report.schema_version == 9 and report.cuda_version is None
    gpu = report.gpus[0]
    assert gpu.pci_bus_id == "0000:04:00.0"
    assert gpu.ecc_uncorrectable_volatile == 3  # double_bit/total
    assert gpu.ecc_uncorrectable_aggregate == 3  # total N/A: sum of device_memory + register_file
    assert gpu.retired_pages_pending is True
    assert gpu.power_draw_w is None and gpu.power_limit_w == 149.0
    assert gpu.unknown_error_fields == ["fan_speed", "power_readings/power_draw"]


@pytest.mark.parametrize("bad", ["", "not xml at all", "<nvidia_smi_log><gpu>", "<other/>",
                                 '<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "b">]><nvidia_smi_log/>'])
def test_xml_garbage_raises_clear_error(bad: str):
    with pytest.raises(SmiParseError) as info:
        parse_smi_xml(bad)
    assert "nvidia-smi -q -x" in str(info.value)  # the fix tells how to capture it again


# file, driver, cuda, attached, products
TEXT_EXPECTED = [
    ("text_q/gpud-e2e__NormalQueryOutput.A10.550.127.05.txt", "550.127.05", "12.4", 1, ["NVIDIA A10"]),
    ("text_q/gpud__nvidia-smi-query.535.161.08.out.0.valid", "535.161.08", "12.2", 8, [H100] * 8),
    ("text_q/thamada-gls__A10__nvidia-smi-a.txt", "550.90.12", "12.4", 1, ["NVIDIA A10"]),
    (f"{H100_CAPTURE}idle__q.txt", "590.48.01", "13.1", 1, [H100]),
    (f"{H100_CAPTURE}load__q.txt", "590.48.01", "13.1", 1, [H100]),
]


@pytest.mark.parametrize(("rel", "driver", "cuda", "attached", "products"), TEXT_EXPECTED,
                         ids=[Path(row[0]).name for row in TEXT_EXPECTED])
def test_text_fixture(rel: str, driver: str, cuda: str, attached: int, products: list[str]):
    report = parse_smi_text(read(rel))
    assert report.source_kind == "text" and report.warnings == []
    assert (report.driver_version, report.cuda_version, report.attached_gpus) == (driver, cuda, attached)
    assert [gpu.name for gpu in report.gpus] == products
    assert [gpu.index for gpu in report.gpus] == list(range(len(products)))


def test_text_values():
    a10 = parse_smi_text(read("text_q/gpud-e2e__NormalQueryOutput.A10.550.127.05.txt")).gpus[0]
    assert a10.pci_bus_id == "00000000:06:00.0" and a10.uuid == "GPU-51ae0086-e1ac-4a20-f062-9caa44e4df6d"
    assert (a10.memory_total_mib, a10.memory_used_mib, a10.temperature_c) == (23028, 1, 33)
    assert (a10.power_draw_w, a10.power_limit_w) == (21.3, 150.0)
    assert (a10.pcie_gen_current, a10.pcie_gen_max, a10.pcie_width_current) == (1, 4, 16)
    assert a10.remapped_rows_pending is False and a10.ecc_uncorrectable_volatile == 0
    assert a10.pci_device_id == "223610DE"

    h100 = parse_smi_text(read("text_q/gpud__nvidia-smi-query.535.161.08.out.0.valid")).gpus
    assert h100[0].pci_bus_id == "00000000:19:00.0" and h100[7].name == H100
    assert h100[0].throttle_reasons_active == ["hw_slowdown", "hw_power_brake_slowdown"]
    assert h100[0].fabric_state == "Completed" and h100[0].mig_mode_current is False

    load = parse_smi_text(read(f"{H100_CAPTURE}load__q.txt")).gpus[0]
    assert (load.power_draw_w, load.utilization_gpu_pct, load.memory_used_mib) == (629.45, 100, 19818)


def test_text_invalid_fixture_is_reported_honestly():
    """535.183.01 ...invalid: 'Attached GPUs : 8' but one GPU section that stops inside Clocks Event Reasons,
    whose HW slowdown keys were renamed 'Invalid HW ...'."""
    text = read("text_q/gpud__nvidia-smi-query.535.183.01.out.0.invalid")
    report = parse_smi_text(text)
    assert (report.driver_version, report.cuda_version, report.attached_gpus) == ("535.183.01", "12.2", 8)
    assert len(report.gpus) == 1
    joined = " ".join(report.warnings)
    assert "'Attached GPUs : 8' but the output holds 1 GPU section(s)" in joined
    assert "truncated" in joined
    assert "'Invalid HW Slowdown'" in joined and "'Invalid HW Power Brake Slowdown'" in joined
    gpu = report.gpus[0]
    assert gpu.memory_total_mib is None  # past the truncation point
    assert "hw_slowdown" not in gpu.throttle_reasons_active
    with pytest.raises(SmiParseError, match="incomplete `nvidia-smi -q` output"):
        parse_smi_text(text, strict=True)


def test_text_rejects_other_text():
    with pytest.raises(SmiParseError, match="not `nvidia-smi -q` output"):
        parse_smi_text("hello\nworld\n")


def test_text_old_key_names():
    """Pre-535 names: 'Clocks Throttle Reasons', 'Power Readings'; R610 deprecation suffix on the version."""
    text = (
        "Driver Version                            : 610.57.04 [Deprecated; use KMD Version instead]\n"
        "KMD Version                               : 610.57.04\n"
        "CUDA Version                              : 13.3 [Deprecated; will be removed]\n"
        "Attached GPUs                             : 1\n"
        "GPU 00000000:3B:00.0\n"
        "    Product Name                          : Tesla V100-SXM2-32GB\n"
        "    Clocks Throttle Reasons\n"
        "        Idle                              : Not Active\n"
        "        HW Slowdown                       : Active\n"
        "            HW Thermal Slowdown           : Active\n"
        "    Power Readings\n"
        "        Power Draw                        : 55.10 W\n"
        "        Power Limit                       : 300.00 W\n"
        "    Processes                             : None\n"
    )
    report = parse_smi_text(text)
    assert (report.driver_version, report.cuda_version, report.warnings) == ("610.57.04", "13.3", [])
    gpu = report.gpus[0]
    assert gpu.throttle_reasons_active == ["hw_slowdown", "hw_thermal_slowdown"]
    assert (gpu.power_draw_w, gpu.power_limit_w) == (55.1, 300.0)


# file, driver, cuda, products
TABLE_EXPECTED = [
    ("table/gpud-e2e__NormalSMIOutput.A10.550.127.05.txt", "550.127.05", "12.4", ["NVIDIA A10"]),
    ("table/thamada-gls__H100SXMx8__nvidia-smi.txt", "565.57.01", "12.7", [H100] * 8),
    ("table/thamada-gls__L4__nvidia-smi.txt", "550.90.07", "12.4", ["NVIDIA L4"]),
    ("table/thamada-gls__V100_x8__nvidia-smi.txt", "550.127.05", "12.4", ["Tesla V100-SXM2-16GB"] * 8),
    (f"{H100_CAPTURE}idle__table.txt", "590.48.01", "13.1", [H100]),
    (f"{H100_CAPTURE}load__table.txt", "590.48.01", "13.1", [H100]),
]


@pytest.mark.parametrize(("rel", "driver", "cuda", "products"), TABLE_EXPECTED,
                         ids=[Path(row[0]).name for row in TABLE_EXPECTED])
def test_table_fixture(rel: str, driver: str, cuda: str, products: list[str]):
    report = parse_smi_table(read(rel))
    assert report.source_kind == "table"
    assert (report.driver_version, report.cuda_version) == (driver, cuda)
    assert [gpu.name for gpu in report.gpus] == products
    assert report.gpu_count == len(products)
    assert [gpu.index for gpu in report.gpus] == list(range(len(products)))


def test_table_values():
    a10 = parse_smi_table(read("table/gpud-e2e__NormalSMIOutput.A10.550.127.05.txt")).gpus[0]
    assert a10.pci_bus_id == "00000000:06:00.0" and a10.persistence_mode is True
    assert (a10.temperature_c, a10.performance_state) == (32, "P8")
    assert (a10.power_draw_w, a10.power_limit_w) == (21, 150)
    assert (a10.memory_used_mib, a10.memory_total_mib, a10.utilization_gpu_pct) == (1, 23028, 0)
    assert a10.ecc_mode is True and a10.ecc_uncorrectable_volatile == 0
    assert a10.mig_mode_current is None  # "N/A"

    h100 = parse_smi_table(read("table/thamada-gls__H100SXMx8__nvidia-smi.txt")).gpus
    assert [g.pci_bus_id for g in h100][:3] == ["00000000:18:00.0", "00000000:2A:00.0", "00000000:3A:00.0"]
    assert [g.power_draw_w for g in h100] == [100, 82, 85, 85, 84, 85, 86, 75]
    assert all(g.mig_mode_current is False for g in h100)  # "Disabled"

    load = parse_smi_table(read(f"{H100_CAPTURE}load__table.txt")).gpus[0]
    assert (load.power_draw_w, load.memory_used_mib, load.utilization_gpu_pct) == (629, 19818, 100)


def test_table_error_tokens_and_inforom_warning():
    text = read("table/gpud-e2e__NormalSMIOutput.A10.550.127.05.txt")
    text = text.replace("21W /  150W", "ERR! /  150W") + "WARNING: infoROM is corrupted at gpu 0000:06:00.0\n"
    gpu = parse_smi_table(text).gpus[0]
    assert gpu.power_draw_w is None and gpu.unknown_error_fields == ["power_draw"]
    assert gpu.inforom_ok is False


def test_table_rejects_other_text():
    with pytest.raises(SmiParseError, match="banner"):
        parse_smi_table("+----+\n| nothing |\n")


# file, driver, count, products
CSV_EXPECTED = [
    (f"{H100_CAPTURE}idle__querygpu.txt", "590.48.01", 1, [H100]),
    (f"{H100_CAPTURE}load__querygpu.txt", "590.48.01", 1, [H100]),
    ("csv/nvidia_gpu_exporter__sample-output.csv", "471.11", 1, ["NVIDIA GeForce RTX 2080 SUPER"]),
]


@pytest.mark.parametrize(("rel", "driver", "count", "products"), CSV_EXPECTED,
                         ids=[Path(row[0]).name for row in CSV_EXPECTED])
def test_csv_fixture(rel: str, driver: str, count: int, products: list[str]):
    report = parse_smi_csv(read(rel))
    assert report.source_kind == "csv" and report.cuda_version is None  # --query-gpu has no CUDA field
    assert (report.driver_version, report.attached_gpus) == (driver, count)
    assert [gpu.name for gpu in report.gpus] == products


def test_csv_values_with_units_in_header():
    gpu = parse_smi_csv(read(f"{H100_CAPTURE}load__querygpu.txt")).gpus[0]
    assert gpu.pci_bus_id == "00000000:00:09.0" and gpu.index == 0
    assert (gpu.memory_total_mib, gpu.memory_used_mib) == (81559, 19818)  # "memory.total [MiB]"
    assert (gpu.pcie_width_current, gpu.pcie_width_max, gpu.utilization_gpu_pct) == (16, 16, 100)
    assert gpu.inforom_ok is True  # inforom.checksum_validation = valid
    assert gpu.remapped_rows_pending is False and gpu.ecc_uncorrectable_volatile == 0
    rtx = parse_smi_csv(read("csv/nvidia_gpu_exporter__sample-output.csv")).gpus[0]
    assert rtx.persistence_mode is None and rtx.throttle_reasons_active == ["gpu_idle"]  # Windows: [N/A]


def test_csv_other_queries_are_not_gpu_lists():
    with pytest.raises(SmiParseError, match="--query-compute-apps"):
        parse_smi_csv(read(f"{H100_CAPTURE}load__computeapps.txt"))


def test_list_outputs():
    single = parse_smi_list(read(f"{H100_CAPTURE}capabilities__L.txt"))
    assert [(g.index, g.name, g.mig_devices) for g in single.gpus] == [(0, H100, 0)]
    assert single.gpus[0].uuid == "GPU-00000000-0000-0000-0000-000000000000"
    mig = parse_smi_list(read("csv/nvidia_gpu_exporter__list_gpus.txt"))
    assert [g.index for g in mig.gpus] == list(range(8))
    assert all(g.name == H100 and g.mig_devices == 7 for g in mig.gpus)
    with pytest.raises(SmiParseError):
        parse_smi_list(read(f"{H100_CAPTURE}capabilities__nvlink.txt"))


def test_xml_bytes_with_encoding_declaration():
    raw = read("xml/telegraf__a100-sxm4-v12.xml").encode("utf-8")
    assert raw.startswith(b'<?xml version="1.0" encoding="UTF-8"?>')
    report = parse_smi_xml(raw)
    assert report.schema_version == 12 and report.gpus[0].name == "NVIDIA A100-SXM4-80GB"
