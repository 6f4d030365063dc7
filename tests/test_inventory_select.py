"""--limit patterns, ad-hoc host lists, and the --list / --graph renderings."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunode.errors import UsageError
from gpunode.inventory import Inventory, adhoc_inventory, load_inventory
from gpunode.inventory.adhoc import parse_adhoc_entry
from gpunode.inventory.patterns import split_patterns

DATA = Path(__file__).parent / "data" / "inventory"
A100 = ["gpu-a100-01.example.com", "gpu-a100-02.example.com", "gpu-a100-03.example.com"]
H100 = ["gpu-h100-a.example.com", "gpu-h100-b.example.com"]


@pytest.fixture(scope="module")
def inv() -> Inventory:
    return load_inventory(DATA / "nested.yml")


def selected(inv: Inventory, limit: str | None) -> list[str]:
    return [host.name for host in inv.select(limit)]


@pytest.mark.parametrize("limit", [None, "", "all", "*"])
def test_no_limit_selects_everything_in_inventory_order(inv: Inventory, limit: str | None) -> None:
    assert selected(inv, limit) == list(inv.hosts)


@pytest.mark.parametrize(
    ("limit", "expected"),
    [
        ("gpu", A100 + H100),
        ("a100", A100),
        ("gpu-h100-b.example.com", ["gpu-h100-b.example.com"]),
        ("gpu-a100-*", A100),
        ("*.example.com:!gpu", ["mgmt.example.com", "nfs.example.com", "edge.example.com"]),
        ("gpu:!a100", H100),
        ("gpu,!gpu-h100-a.example.com", [*A100, "gpu-h100-b.example.com"]),
        ("gpu:&top_level", ["gpu-a100-02.example.com"]),
        ("&top_level", ["gpu-a100-02.example.com", "edge.example.com", "node0", "node4", "node8"]),
        ("!gpu", ["mgmt.example.com", "nfs.example.com", "edge.example.com", "node0", "node4", "node8"]),
        ("~gpu-h100-[ab]", H100),
        ("~node[48]", ["node4", "node8"]),
        ("h100,a100", A100 + H100),  # inventory order, not pattern order
        ("gpu:&storage", []),
        ("empty_group", []),
    ],
)
def test_limit_patterns(inv: Inventory, limit: str, expected: list[str]) -> None:
    assert selected(inv, limit) == expected


@pytest.mark.parametrize(
    ("limit", "shown"), [("xyz", "'xyz'"), ("gpu:!nope", "'!nope'"), ("gpu,&h200", "'&h200'")]
)
def test_unknown_pattern_is_a_usage_error(inv: Inventory, limit: str, shown: str) -> None:
    with pytest.raises(UsageError) as info:
        inv.select(limit)
    message = str(info.value)
    assert message.startswith(f"--limit: no host or group matches {shown}; known groups: gpu, a100")
    assert info.value.source == "--limit"
    assert info.value.fix


def test_bad_regex_is_a_usage_error(inv: Inventory) -> None:
    with pytest.raises(UsageError, match="bad regular expression"):
        inv.select("~gpu[")


@pytest.mark.parametrize(
    ("limit", "parts"),
    [
        ("a,b", ["a", "b"]),
        ("a:b:!c", ["a", "b", "!c"]),
        (" a , &b ", ["a", "&b"]),
        ("web[1:3]:db", ["web[1:3]", "db"]),
        ("2001:db8::1", ["2001:db8::1"]),
        ("~gpu[", ["~gpu["]),
        ("~gpu-0[1:3]:!x", ["~gpu-0[1:3]", "!x"]),
    ],
)
def test_split_patterns(limit: str, parts: list[str]) -> None:
    assert split_patterns(limit) == parts


# --- ad-hoc host lists --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "parsed"),
    [
        ("gpu1", ("gpu1", None, None)),
        ("ubuntu@gpu1", ("gpu1", "ubuntu", None)),
        ("gpu1:2222", ("gpu1", None, 2222)),
        ("root@203.0.113.5:2200", ("203.0.113.5", "root", 2200)),
        ("[2001:db8::5]:2201", ("2001:db8::5", None, 2201)),
        ("admin@[2001:db8::5]:22", ("2001:db8::5", "admin", 22)),
        ("2001:db8::6", ("2001:db8::6", None, None)),
    ],
)
def test_parse_adhoc_entry(entry: str, parsed: tuple[str, str | None, int | None]) -> None:
    assert parse_adhoc_entry(entry) == parsed


@pytest.mark.parametrize("entry", ["@gpu1", "gpu1:ssh", "user@", "a b"])
def test_bad_adhoc_entry(entry: str) -> None:
    with pytest.raises(UsageError):
        parse_adhoc_entry(entry)


def test_adhoc_without_base() -> None:
    inv = adhoc_inventory("gpu1,ubuntu@203.0.113.7:2222,localhost")
    assert list(inv.hosts) == ["gpu1", "203.0.113.7", "localhost"]
    host = inv.hosts["203.0.113.7"]
    assert (host.address, host.user, host.port, host.groups) == (
        "203.0.113.7",
        "ubuntu",
        2222,
        ["all", "ungrouped"],
    )
    assert inv.groups["ungrouped"].hosts == ["gpu1", "203.0.113.7", "localhost"]
    assert inv.hosts["localhost"].local is True
    assert selected(inv, None) == ["gpu1", "203.0.113.7", "localhost"]


def test_adhoc_takes_known_hosts_from_base(inv: Inventory) -> None:
    adhoc = adhoc_inventory("gpu-a100-01.example.com,root@gpu-h100-a.example.com,198.51.100.99", base=inv)
    known = adhoc.hosts["gpu-a100-01.example.com"]
    assert known.user == "ubuntu" and known.groups == ["all", "gpu", "a100"]
    assert adhoc.hosts["gpu-h100-a.example.com"].user == "root"  # user@ on the command line overrides
    assert adhoc.hosts["gpu-h100-a.example.com"].vars["rack"] == "r7"
    new = adhoc.hosts["198.51.100.99"]
    assert new.groups == ["all", "ungrouped"]
    assert new.vars["ntp_server"] == "192.0.2.1"  # the base's "all" vars apply to new hosts too
    assert list(adhoc.hosts) == ["gpu-a100-01.example.com", "gpu-h100-a.example.com", "198.51.100.99"]
    assert set(adhoc.groups) == {"all", "ungrouped", "gpu", "a100", "h100"}
    assert inv.hosts["gpu-h100-a.example.com"].user == "ubuntu"  # the base is not changed


def test_adhoc_empty_spec_is_an_error() -> None:
    with pytest.raises(UsageError, match="no hosts given"):
        adhoc_inventory(" , ")


# --- --list and --graph -------------------------------------------------------------------------------------


def test_to_ansible_list_shape(inv: Inventory) -> None:
    listed = inv.to_ansible_list()
    assert list(listed)[:3] == ["_meta", "all", "ungrouped"]
    assert listed["all"] == {
        "children": ["ungrouped", "gpu", "storage", "top_level"],
        "vars": inv.groups["all"].vars,
    }
    assert listed["gpu"] == {"children": ["a100", "h100"], "vars": {"tier": "gpu", "ansible_user": "ubuntu"}}
    assert listed["a100"] == {"hosts": A100, "vars": {"gpu_model": "A100"}}
    assert "empty_group" not in listed  # empty groups are left out, as ansible-inventory does
    assert listed["top_level"]["children"] == ["empty_group"]
    assert list(listed["_meta"]["hostvars"]) == list(inv.hosts)
    assert listed["_meta"]["hostvars"]["node4"] == {"tier": "base", "ntp_server": "192.0.2.1"}


def test_graph_text(inv: Inventory) -> None:
    lines = inv.graph().splitlines()
    assert lines[:6] == [
        "@all:",
        "  |--@ungrouped:",
        "  |  |--mgmt.example.com",
        "  |--@gpu:",
        "  |  |--@a100:",
        "  |  |  |--gpu-a100-01.example.com",
    ]
    assert "  |  |--@empty_group:" in lines
    assert lines[-1] == "  |  |--node8"


@pytest.mark.parametrize("command", ["verify-gpu", "facts", "collect"])
def test_a_positional_host_that_matches_nothing_is_named_as_such(command: str) -> None:
    """`verify-gpu nosuch -i INV`: the pattern came from the HOST argument, not --limit; exit 2 before connecting."""
    from tests.conftest import run_cli

    result = run_cli(command, "nosuch", "-i", str(DATA / "nested.yml"))
    assert result.code == 2, result.output
    assert "HOST (the positional argument): no host or group matches 'nosuch'" in result.output, result.output
    assert "--limit" not in result.output
