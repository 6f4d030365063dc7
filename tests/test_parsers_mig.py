"""gpunode.parsers.mig against real MIG listings (tests/data/nvidia/mig/, sources in its SOURCES.md).

Expected values were written by reading each fixture, not computed by the parser.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunode.parsers.errors import SmiParseError
from gpunode.parsers.mig import (
    ComputeInstance,
    GpuInstance,
    GpuInstanceProfile,
    MigMode,
    parse_compute_instances,
    parse_gpu_instance_profiles,
    parse_gpu_instances,
    parse_gpu_processes,
    parse_mig_modes,
)

DATA = Path(__file__).resolve().parent / "data" / "nvidia" / "mig"


def read(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def test_every_fixture_is_named_in_sources() -> None:
    sources = read("SOURCES.md")
    for path in DATA.iterdir():
        if path.name != "SOURCES.md":
            assert path.name in sources, f"{path.name} has no row in SOURCES.md"


# ---- the mode query ---------------------------------------------------------------------------------------------
def test_modes_without_header_by_the_fields_asked() -> None:
    fields = ("name", "pci.bus_id", "mig.mode.current", "mig.mode.pending")
    (a100,) = parse_mig_modes(read("query__harvester__a100-pcie-40gb-enabled.csv"), fields)
    assert a100 == MigMode(None, "00000000:04:00.0", "NVIDIA A100-PCIE-40GB", True, True)
    assert a100.capable and not a100.change_pending
    (a2,) = parse_mig_modes(read("query__harvester__a2-not-capable.csv"), fields)
    assert (a2.name, a2.current, a2.pending, a2.capable) == ("NVIDIA A2", None, None, False)


@pytest.mark.parametrize(("name", "gpu", "mode"), [
    ("query__gpu-exporter__h100-80gb-hbm3-mig-enabled.csv", "NVIDIA H100 80GB HBM3", True),
    ("query__gpu-exporter__h100-80gb-hbm3-mig-disabled.csv", "NVIDIA H100 80GB HBM3", False),
    ("query__gpu-exporter__rtx-2080-super-not-capable.csv", "NVIDIA GeForce RTX 2080 SUPER", None),
])
def test_modes_by_header_among_two_hundred_fields(name: str, gpu: str, mode: bool | None) -> None:
    (row,) = parse_mig_modes(read(name))
    assert (row.index, row.name, row.current, row.pending) == (0, gpu, mode, mode)
    assert row.capable is (mode is not None)


def test_modes_empty_and_failed() -> None:
    assert parse_mig_modes("No devices were found\n") == []
    assert parse_mig_modes("") == []
    with pytest.raises(SmiParseError, match="NVIDIA-SMI has failed"):
        parse_mig_modes("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure "
                        "that the latest NVIDIA driver is installed and running.\n")


# ---- -lgi -------------------------------------------------------------------------------------------------------
def test_gpu_instances_h100_mixed_with_me_profile() -> None:
    assert parse_gpu_instances(read("lgi__prickle__h100-mixed.txt")) == [
        GpuInstance(0, "1g.10gb", 19, 13, "6:1"),
        GpuInstance(0, "3g.40gb", 9, 1, "0:4"),
        GpuInstance(0, "1g.10gb+me", 20, 11, "4:1"),
    ]


@pytest.mark.parametrize(("name", "profiles", "ids"), [
    ("lgi__prickle__h100-2x1g.10gb.txt", ["1g.10gb"] * 2, [11, 13]),
    ("lgi__prickle__h200-2x1g.18gb.txt", ["1g.18gb"] * 2, [11, 13]),
    ("lgi__harvester__h100-nvl-2x3g.47gb.txt", ["3g.47gb"] * 2, [1, 2]),
    ("lgi__nvidia-mig-guide__a100-2x3g.20gb.txt", ["3g.20gb"] * 2, [1, 2]),
    ("lgi__cloud-native-docs__a100-7x1g.5gb-indented.txt", ["1g.5gb"] * 7, [7, 8, 9, 10, 11, 12, 13]),
    ("lgi__summer-lo__a30-4x1g.6gb.txt", ["1g.6gb"] * 4, [3, 4, 5, 6]),
])
def test_gpu_instances_any_width(name: str, profiles: list[str], ids: list[int]) -> None:
    rows = parse_gpu_instances(read(name))
    assert [r.profile for r in rows] == profiles
    assert [r.instance_id for r in rows] == ids
    assert {r.gpu for r in rows} == {0}


def test_gpu_instances_placement_read() -> None:
    rows = parse_gpu_instances(read("lgi__cloud-native-docs__a100-7x1g.5gb-indented.txt"))
    assert [r.placement for r in rows] == [f"{i}:1" for i in range(7)]
    assert {r.profile_id for r in rows} == {19}


def test_mig_disabled_is_no_rows() -> None:
    assert parse_gpu_instances(read("lgi__prickle__h100-mig-disabled.txt")) == []
    assert parse_compute_instances(read("lci__prickle__h100-mig-disabled.txt")) == []


# ---- -lci -------------------------------------------------------------------------------------------------------
def test_compute_instances_mixed_share_of_a_gpu_instance() -> None:
    assert parse_compute_instances(read("lci__prickle__h100-mixed.txt")) == [
        ComputeInstance(0, 13, "1g.10gb", 0, 0, "0:1"),
        ComputeInstance(0, 1, "1c.3g.40gb", 0, 0, "2:1"),
        ComputeInstance(0, 11, "1g.10gb", 0, 0, "0:1"),
    ]


@pytest.mark.parametrize(("name", "parents"), [
    ("lci__prickle__h100-2x1g.10gb.txt", [11, 13]),
    ("lci__prickle__h200-2x1g.18gb.txt", [11, 13]),
    ("lci__harvester__1g.5gb.txt", [13]),
])
def test_compute_instances_parents(name: str, parents: list[int]) -> None:
    assert [r.gpu_instance_id for r in parse_compute_instances(read(name))] == parents


def test_compute_instances_listing_refused() -> None:
    with pytest.raises(SmiParseError, match="Insufficient Permissions") as caught:
        parse_compute_instances(read("lci__hami-issue-1044__insufficient-permissions.txt"))
    assert "sudo" in caught.value.fix


# ---- -lgip ------------------------------------------------------------------------------------------------------
def test_profiles_h100_all_free_even_with_mig_off() -> None:
    rows = parse_gpu_instance_profiles(read("lgip__prickle__h100-mig-disabled.txt"))
    assert [(r.name, r.profile_id, r.free, r.total) for r in rows] == [
        ("1g.10gb", 19, 7, 7), ("1g.10gb+me", 20, 1, 1), ("1g.20gb", 15, 4, 4), ("2g.20gb", 14, 3, 3),
        ("3g.40gb", 9, 2, 2), ("4g.40gb", 5, 1, 1), ("7g.80gb", 0, 1, 1)]
    assert rows[-1] == GpuInstanceProfile(0, "7g.80gb", 0, 1, 1, 79.25)


@pytest.mark.parametrize(("name", "count", "first", "last"), [
    ("lgip__harvester__a100-pcie-40gb-free.txt", 7, ("1g.5gb", 19, 7, 7), ("7g.40gb", 0, 1, 1)),
    ("lgip__harvester__h100-nvl-used.txt", 7, ("1g.12gb", 19, 0, 7), ("7g.94gb", 0, 0, 1)),
    ("lgip__prickle__h200-2x1g.18gb.txt", 7, ("1g.18gb", 19, 5, 7), ("7g.141gb", 0, 0, 1)),
    ("lgip__prickle__h100-mixed.txt", 7, ("1g.10gb", 19, 1, 7), ("7g.80gb", 0, 0, 1)),
    ("lgip__summer-lo__a30-used.txt", 4, ("1g.6gb", 14, 0, 4), ("4g.24gb", 0, 0, 1)),
])
def test_profiles_counts(name: str, count: int, first: tuple, last: tuple) -> None:
    rows = parse_gpu_instance_profiles(read(name))
    assert len(rows) == count
    assert (rows[0].name, rows[0].profile_id, rows[0].free, rows[0].total) == first
    assert (rows[-1].name, rows[-1].profile_id, rows[-1].free, rows[-1].total) == last


def test_not_a_listing_is_an_error() -> None:
    with pytest.raises(SmiParseError, match="not a gpu instances listing"):
        parse_gpu_instances(read("query__harvester__a2-not-capable.csv"))


# ---- processes --------------------------------------------------------------------------------------------------
def test_processes_by_uuid_noheader() -> None:
    rows = parse_gpu_processes(read("apps__prickle__h100-mixed.csv"),
                               ("gpu_uuid", "pid", "process_name", "used_gpu_memory"))
    assert [(r.pid, r.name) for r in rows] == [(23808, "/tmp/ghost"), (23804, "/tmp/loadgen"),
                                              (23806, "/tmp/loadgen")]
    assert {r.gpu for r in rows} == {"GPU-0d0831da-0c98-2717-6446-8acd91d39b65"}
