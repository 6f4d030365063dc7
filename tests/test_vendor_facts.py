"""Every vendor fact table names, for each entry, the vendor file or page it was read from."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import gpunode
from gpunode.vendor_facts import TABLES, Fact, Source, fact_table

# The tables of distro facts, kept beside the adapter that uses them (gpunode/distros/); the others (AWS, the
# clouds' image builders, NVIDIA's distro-independent driver facts) stay with their vendor's code.
DISTRO_TABLES = {"ubuntu": "ubuntu", "ubuntu-amis": "ubuntu", "debian-amis": "debian",
                 "debian-driver-sources": "debian", "el": "rpm",
                 "al2023": "al2023", "alinux": "alinux", "nvidia-container-toolkit": "repos",
                 "nvidia-cuda-repo": "repos", "docker": "repos", "ubuntu-gce-images": "ubuntu",
                 "debian-gce-images": "debian"}


def _import_all() -> None:
    for module in pkgutil.walk_packages(gpunode.__path__, "gpunode."):
        if module.name in ("gpunode.__main__",):
            continue
        importlib.import_module(module.name)


def _defined_in() -> dict[str, str]:
    """Table name -> the module whose source registers it (`fact_table("name", ...)`)."""
    root = Path(gpunode.__file__).parent
    where = {}
    for path in sorted(root.rglob("*.py")):
        for name in re.findall(r'fact_table\(\s*"([^"]+)"', path.read_text()):
            where[name] = ".".join(("gpunode", *path.relative_to(root).with_suffix("").parts))
    return where


def test_every_entry_of_every_table_cites_its_source() -> None:
    _import_all()
    assert TABLES, "no vendor fact table is registered"
    missing = []
    for name, table in TABLES.items():
        for key, fact in table.items():
            if not isinstance(fact, Fact):
                missing.append(f"{name}[{key}]: not a Fact")
                continue
            missing += [f"{name}[{key}]: {problem}" for problem in fact.source.problems()]
    assert not missing, "\n".join(missing)


def test_the_distro_tables_live_with_the_adapters() -> None:
    where = _defined_in()
    assert {name: where.get(name) for name in DISTRO_TABLES} == {
        name: f"gpunode.distros.{module}" for name, module in DISTRO_TABLES.items()}


def test_a_source_without_commit_or_line_is_refused() -> None:
    assert Source("aws/amazon-ecs-ami", "al2023gpu.pkr.hcl", "", "").problems() == [
        "ref '' is not a commit or tag", "line '' is not a line or range"]
    assert Source(url="http://example.invalid/doc").problems()
    assert not Source(url="https://docs.aws.amazon.com/batch/latest/APIReference/API_Ec2Configuration.html").problems()
    assert not Source("aws/amazon-ecs-ami", "al2023gpu.pkr.hcl", "0123abc", "12-14").problems()


def test_a_table_is_registered_once() -> None:
    table = {"x": Fact(1, Source(url="https://example.com/"))}
    fact_table("test-once", table)
    with pytest.raises(ValueError):
        fact_table("test-once", dict(table))
    del TABLES["test-once"]
