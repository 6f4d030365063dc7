"""The GPU model catalogue and its floors (issue 38): every fact and threshold carries a source whose quoted text holds
its number, the captures quoted are really there, real nvidia-smi names in tests/data are recognised (and their PCI
ids agree with the catalogue), and the derived floors follow their stated rules."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpunode.parsers.catalogs.gpu_floors import (
    allreduce_floor,
    gen_floors,
    h2d_floor,
    p2p_floor,
    published,
)
from gpunode.parsers.catalogs.gpu_models import FACTS, by_key, cite, identify, models, sources

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"


def _number_in(number: object, quote: str) -> bool:
    """The number as the quote writes it: 16 in '16GB' or '16.0', 0x233010DE in '233010DE' (case aside)."""
    if isinstance(number, str):
        return number.upper() in quote.upper()
    value = float(number)  # type: ignore[arg-type]
    return any(float(found) == value for found in re.findall(r"(?<![\d.])\d+(?:\.\d+)?", quote))


def _entries() -> list[tuple[str, str, dict]]:
    found = []
    for model in models():
        found += [(model.key, fact, entry) for fact, entry in model.facts.items()]
        found += [(model.key, "cloud", entry) for entry in model.clouds]
    return found


def test_at_least_twelve_models_from_p100_to_b200_pcie_and_sxm() -> None:
    keys = {m.key for m in models()}
    assert len(keys) >= 12 and len(keys) == len(models())
    for family in ("p100", "v100", "t4", "a10", "a10g", "a100", "l4", "l40s", "h100", "h200", "b200"):
        assert any(k == family or k.startswith(family + "-") for k in keys), family
    assert {m.form for m in models()} == {"pcie", "sxm"}
    for family in ("p100", "v100", "a100", "h100"):
        assert {m.form for m in models() if m.key.startswith(family)} == {"pcie", "sxm"}, family


@pytest.mark.parametrize(("key", "fact", "entry"), _entries(), ids=lambda x: x if isinstance(x, str) else "")
def test_every_fact_has_a_source_whose_quote_holds_its_number(key: str, fact: str, entry: dict) -> None:
    assert entry["src"] in sources(), f"{key}.{fact}: unknown source {entry['src']}"
    src = sources()[entry["src"]]
    quote = entry["quote"]
    assert quote.strip(), f"{key}.{fact}: no quote"
    if src.get("repo"):
        assert re.fullmatch(r"[0-9a-f]{40}", src["commit"]) and int(entry["line"]) > 0, f"{key}.{fact}"
    elif entry["src"] == "capture":
        assert int(entry["line"]) > 0
    else:
        assert src["url"].startswith(("https://", "http://")), f"{key}.{fact}"
    shown = entry.get("q", entry["v"])
    if fact in ("name", "cloud"):
        return
    assert _number_in(shown, quote), f"{key}.{fact}: {shown!r} is not in the quote {quote!r}"
    if "q" in entry:
        assert entry.get("note") or fact == "device_id", f"{key}.{fact}: a converted number needs its note"


def test_the_number_check_catches_a_typo_on_either_side() -> None:
    assert _number_in(21.0, "check_gpu_bw 21 238") and _number_in(238, "check_gpu_bw 21 238")
    assert not _number_in(12.0, "check_gpu_bw 21 238")      # a typo in the value
    assert not _number_in(21.0, "check_gpu_bw 12 238")      # a typo in the quote
    assert not _number_in(16, "min_pci_width: 160.0") and _number_in(16, "min_pci_width: 16.0")
    assert _number_in("20b2", "Device Id : 0x20B210DE") and not _number_in("20b5", "Device Id : 0x20B210DE")


def test_quoted_captures_are_on_their_lines() -> None:
    checked = 0
    for key, fact, entry in _entries():
        if entry["src"] != "capture":
            continue
        lines = (REPO / entry["file"]).read_text(encoding="utf-8").splitlines()
        assert entry["quote"] in lines[int(entry["line"]) - 1], f"{key}.{fact}: {entry['file']}:{entry['line']}"
        checked += 1
    assert checked >= 20


def test_names_match_their_name_fact_and_the_device_ids_are_hex() -> None:
    for model in models():
        assert model.value("name") in model.names, model.key
        assert re.fullmatch(r"[0-9a-f]{4}", model.value("device_id")), model.key
        assert set(model.facts) <= set(FACTS)
        assert cite(model.facts["name"])


def test_published_floors_quote_their_numbers() -> None:
    for name, keys in (("nccl", ("busbw_gbs",)), ("nvbandwidth", ("h2d_gbs", "p2p_gbs"))):
        refs = published(name)
        assert refs
        for ref in refs:
            quote = ref["quote"]
            for key in keys:
                if key in ref:
                    assert _number_in(ref[key], quote), f"{ref['vm']}: {ref[key]} not in {quote!r}"
            if name == "nccl":
                assert f" {ref['message_bytes'] >> 30}G" in quote, ref["vm"]
            assert all(by_key(k) for k in ref["models"])
            assert ref["source"]["path"].startswith("conf/") and len(ref["source"]["commit"]) == 40


# Real names from the captures in tests/data, each with the model it is (None: not in the catalogue).
NAMES = {
    "Tesla P100-PCIE-16GB": "p100-pcie-16gb", "Tesla V100-PCIE-32GB": "v100-pcie-32gb",
    "Tesla V100-SXM2-16GB": "v100-sxm2-16gb", "Tesla V100-SXM2-32GB": "v100-sxm2-32gb", "Tesla T4": "t4",
    "NVIDIA A10": "a10", "NVIDIA A10G": "a10g", "NVIDIA A100-PCIE-40GB": "a100-pcie-40gb",
    "NVIDIA A100 80GB PCIe": "a100-pcie-80gb", "NVIDIA A100-SXM4-40GB": "a100-sxm4-40gb",
    "NVIDIA A100-SXM4-80GB": "a100-sxm4-80gb", "NVIDIA L4": "l4", "NVIDIA L40S": "l40s",
    "NVIDIA H100 NVL": "h100-nvl", "NVIDIA H100 80GB HBM3": "h100-sxm5", "NVIDIA H200": "h200-sxm",
    "NVIDIA B200": "b200",
    "NVIDIA A40": None, "NVIDIA GH200 480GB": None, "NVIDIA A800 80GB PCIe": None, "Tesla K80": None,
    "NVIDIA GeForce RTX 4090": None, "NVIDIA RTX A6000": None, "NVIDIA H100": None, "GRID P4-1Q": None,
}


_NAME = r"((?:NVIDIA|Tesla|GRID) [^<|,\n(]*?)"
_NAME_PATTERNS = [re.compile(p, re.M) for p in (
    rf"<product_name>{_NAME}</product_name>",                       # nvidia-smi -q -x
    rf"Product Name\s+:\s+{_NAME}\s*$",                             # nvidia-smi -q
    rf"^\|\s+\d+\s+{_NAME}\s+(?:On|Off)\s+\|",                      # the nvidia-smi table
    rf"^{_NAME}, ",                                                  # --query-gpu=name,... --format=csv
    rf"^GPU \d+: {_NAME} \(UUID",                                    # nvidia-smi -L / nvlink -s
    rf"Rank\s+\d+ .*?\] {_NAME}\s*$",                                # nccl-tests rank lines
    rf"^Device \d+: {_NAME} \(",                                     # nvbandwidth
)]


def _names_in_captures() -> set[str]:
    found: set[str] = set()
    for path in DATA.rglob("*"):
        if path.is_file() and path.suffix in {".xml", ".txt", ".csv", ".md"}:
            text = path.read_text(encoding="utf-8", errors="replace")
            for pattern in _NAME_PATTERNS:
                found |= {m.strip() for m in pattern.findall(text)}
    return found


@pytest.mark.parametrize(("name", "key"), NAMES.items())
def test_real_names_are_recognised(name: str, key: str | None) -> None:
    assert name in _names_in_captures() or name == "NVIDIA H100", f"{name} is not in any capture"
    model = identify(name)
    assert (model.key if model else None) == key


def test_every_catalogued_name_seen_in_a_capture_is_recognised() -> None:
    seen = _names_in_captures()
    catalogued = {n for m in models() for n in m.names}
    assert len(seen & catalogued) >= 14
    for name in seen:
        model = identify(name)
        if name in catalogued:
            assert model is not None and name in model.names, name


def _ids_in_captures() -> list[tuple[str, str, str]]:
    """(file, product name, PCI device id) pairs from nvidia-smi -q text and XML captures."""
    pairs = []
    for path in sorted(DATA.rglob("*")):
        if not (path.is_file() and path.suffix in {".txt", ".xml"}):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for block in re.split(r"\nGPU [0-9A-F]{8}:|<gpu id=", text)[1:]:
            name = re.search(r"(?:Product Name\s+:\s+|<product_name>)([^<\n]+)", block)
            dev = re.search(r"(?:Device Id\s+:\s+0x|<pci_device_id>)([0-9A-Fa-f]{4})10DE", block)
            if name and dev:
                pairs.append((path.name, name[1].strip(), dev[1].lower()))
    return pairs


def test_catalogued_device_ids_agree_with_real_captures() -> None:
    checked = 0
    for file, name, device in _ids_in_captures():
        model = identify(name)
        if model is not None and name in model.names:
            assert model.value("device_id") == device, f"{file}: {name} reports {device}"
            checked += 1
    assert checked >= 8


def test_pcie_and_sxm_parts_stay_apart() -> None:
    assert identify("NVIDIA H100 PCIe").key == "h100-pcie" and identify("NVIDIA H100 PCIe").form == "pcie"
    assert identify("H100 SXM").key == "h100-sxm5" and identify("NVIDIA H200 NVL").key == "h200-nvl"
    assert identify("H100") is None and identify("A100") is None  # ambiguous: the caller falls back to families
    assert identify("NVIDIA L40") is None and identify("NVIDIA A10M") is None and identify("NVIDIA GB200") is None
    assert p2p_floor(by_key("h100-pcie"), 8) is None            # no NVLink floor for a PCIe card
    assert p2p_floor(by_key("h100-sxm5"), 8).gbs == 335.0       # published for the SXM part
    assert p2p_floor(by_key("h100-nvl"), 2).gbs == 335.0        # Azure NC H100 v5 (a bridged pair)...
    assert p2p_floor(by_key("h100-nvl"), 8) is None             # ...but not 8 cards bridged in pairs
    assert p2p_floor(by_key("v100-sxm2-16gb"), 8) is None       # hybrid cube mesh: not every pair has NVLink


def test_derived_floors_follow_their_rules() -> None:
    gens = gen_floors()
    assert {g: v for g, (v, _) in gens.items()} == {3: 9.0, 4: 21.0, 5: 48.0}
    t4 = h2d_floor(by_key("t4"))
    assert t4.kind == "derived" and t4.gbs == 9.0 * 8 / 16 and "x8/x16" in t4.source and "nd40rs_v2" in t4.source
    assert h2d_floor(by_key("l40s")).gbs == 21.0 * 8 / 16            # DCGM accepts an L40S at x8
    assert h2d_floor(by_key("h100-pcie")).gbs == 48.0 and h2d_floor(by_key("l4")).gbs == 21.0
    assert h2d_floor(by_key("a10")) is None                          # no sourced PCIe generation: no floor
    b200 = allreduce_floor(by_key("b200"), 8, 1)
    assert b200.kind == "derived" and b200.gbs == round(228 / 300 * 900, 1) and b200.message_bytes == 16 << 30
    assert "nd96amsr_a100_v4.conf:57" in b200.source and "mlcommons" in b200.source
    assert p2p_floor(by_key("b200"), 8).gbs == round(335 / 450 * 900, 1)
    assert allreduce_floor(by_key("b200"), 16, 2) is None            # across hosts the network sets it
    assert allreduce_floor(by_key("t4"), 4, 1) is None               # PCIe only: no rule
    published_one = allreduce_floor(by_key("h100-sxm5"), 8, 1)
    assert published_one.kind == "published" and published_one.gbs == 460.0
