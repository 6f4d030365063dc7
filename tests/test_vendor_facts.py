"""Every vendor fact table names, for each entry, the vendor file or page it was read from."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import gpunode
from gpunode.vendor_facts import TABLES, Fact, Source, fact_table


def _import_all() -> None:
    for module in pkgutil.walk_packages(gpunode.__path__, "gpunode."):
        if module.name in ("gpunode.__main__",):
            continue
        importlib.import_module(module.name)


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
