"""Every named parser of gpunode.parsers against real captured outputs: tests/parsers/<module>/<case>.txt is the output
byte for byte (its origin in SOURCES.md), <case>.json names the parser function and the expected value.

The JSON holds `parser` (a function of gpunode.parsers.<module>), optional `args` (more positional arguments),
optional `each_value_of` (call the parser on each `KEY=value` line's value, as facts.sh's kv lines are read), and
either `expected` (the whole result: a dataclass or named tuple as an object or list of its fields, where an object
may name properties too; sets sorted) or `count` and `contains` (a long capture: how many items, and some of them).
"""

from __future__ import annotations

import dataclasses
import importlib
import json
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent
CASES = sorted(HERE.glob("*/*.json"))


def _plain(value: Any, expected: Any) -> Any:
    """`value` in the JSON shape of `expected` (the object's fields and the properties the case names)."""
    if isinstance(expected, dict) and (dataclasses.is_dataclass(value) or hasattr(value, "_fields")):
        if dataclasses.is_dataclass(value):
            missing = {f.name for f in dataclasses.fields(value)} - set(expected)
            assert not missing, f"the case must give every field: {sorted(missing)} missing"
        return {key: _plain(getattr(value, key), expected[key]) for key in expected}
    if expected is None and dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)  # an item of a long capture's `contains`: an object of every field
    if isinstance(value, dict):
        return {key: _plain(item, (expected or {}).get(key)) for key, item in value.items()}
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if isinstance(value, (list, tuple)):
        shapes = expected if isinstance(expected, list) and len(expected) == len(value) else [None] * len(value)
        return [_plain(item, shape) for item, shape in zip(value, shapes, strict=True)]
    return value


def _run(case: Path) -> tuple[Any, dict[str, Any]]:
    spec = json.loads(case.read_text())
    text = case.with_suffix(".txt").read_text()
    parser = getattr(importlib.import_module(f"gpunode.parsers.{case.parent.name}"), spec["parser"])
    if "each_value_of" in spec:
        prefix = spec["each_value_of"] + "="
        return [parser(line[len(prefix):], *spec.get("args", [])) for line in text.splitlines()
                if line.startswith(prefix)], spec
    return parser(text, *spec.get("args", [])), spec


@pytest.mark.parametrize("case", CASES, ids=[f"{c.parent.name}/{c.stem}" for c in CASES])
def test_parser_on_real_output(case: Path) -> None:
    result, spec = _run(case)
    if "expected" in spec:
        assert _plain(result, spec["expected"]) == spec["expected"]
    else:
        assert len(result) == spec["count"]
        plain = _plain(result, None)
        for item in spec["contains"]:
            assert item in plain


def test_every_case_has_its_capture_and_source() -> None:
    sources = (HERE / "SOURCES.md").read_text()
    assert CASES
    for case in CASES:
        assert case.with_suffix(".txt").is_file(), case
        name = f"{case.parent.name}/{case.stem}"
        assert f"`{name}`" in sources, f"{name} has no line in SOURCES.md"


def test_every_parser_module_has_cases() -> None:
    """The parsers this folder covers (the nvidia-smi, dcgmi, lspci and kernel-log parsers have theirs in
    tests/data/captures)."""
    covered = {case.parent.name for case in CASES}
    assert covered >= {"systemd", "packages", "holds", "dkms", "containers", "nvidia_version", "cmdline", "mounts",
                       "locks"}
