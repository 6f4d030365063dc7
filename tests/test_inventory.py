"""Loading YAML and INI inventories, directories, group_vars/host_vars and variable precedence."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gpunode.inventory import Group, Host, Inventory, load_inventory
from gpunode.inventory.loader import detect_format

DATA = Path(__file__).parent / "data" / "inventory"
EXAMPLES = Path(__file__).parent.parent / "inventory"


def names(inventory: Inventory) -> list[str]:
    return list(inventory.hosts)


# --- YAML ---------------------------------------------------------------------------------------------------


def test_yaml_nested_children_and_ranges() -> None:
    inv = load_inventory(DATA / "nested.yml")
    assert names(inv) == [
        "mgmt.example.com",
        "gpu-a100-01.example.com",
        "gpu-a100-02.example.com",
        "gpu-a100-03.example.com",
        "gpu-h100-a.example.com",
        "gpu-h100-b.example.com",
        "nfs.example.com",
        "edge.example.com",
        "node0",
        "node4",
        "node8",
    ]
    assert inv.groups["gpu"].children == ["a100", "h100"]
    assert inv.groups["a100"].parents == ["gpu"]
    assert inv.groups["gpu"].parents == ["all"]
    assert inv.groups["all"].children == ["ungrouped", "gpu", "storage", "top_level"]
    assert inv.groups["top_level"].children == ["empty_group"]
    assert inv.groups["empty_group"].hosts == []


def test_yaml_host_in_two_groups_gets_both_and_ancestors() -> None:
    host = load_inventory(DATA / "nested.yml").hosts["gpu-a100-02.example.com"]
    assert host.groups == ["all", "gpu", "top_level", "a100"]
    assert host.vars["special"] is True
    assert host.vars["gpu_model"] == "A100"
    assert host.vars["tier"] == "gpu"
    assert host.user == "ubuntu"


def test_yaml_host_with_port_in_name_and_string_hosts_entry() -> None:
    inv = load_inventory(DATA / "nested.yml")
    assert inv.hosts["edge.example.com"].port == 2222
    assert inv.hosts["edge.example.com"].vars["ansible_port"] == 2222
    assert inv.groups["storage"].hosts == ["nfs.example.com"]


def test_yaml_host_only_under_all_is_ungrouped() -> None:
    inv = load_inventory(DATA / "nested.yml")
    assert inv.groups["ungrouped"].hosts == ["mgmt.example.com"]
    assert inv.hosts["mgmt.example.com"].groups == ["all", "ungrouped"]


def test_yaml_range_variables_apply_to_every_expanded_host() -> None:
    inv = load_inventory(DATA / "nested.yml")
    assert [inv.hosts[h].vars["rack"] for h in ("gpu-h100-a.example.com", "gpu-h100-b.example.com")] == [
        "r7",
        "r7",
    ]


def test_group_records_its_source_and_line() -> None:
    inv = load_inventory(DATA / "nested.yml")
    a100 = inv.groups["a100"]
    assert isinstance(a100, Group)
    assert a100.source.endswith("nested.yml")
    assert a100.line == 14
    assert a100.vars == {"gpu_model": "A100"}
    assert inv.groups["all"].vars == {"tier": "base", "ntp_server": "192.0.2.1"}


# --- INI ----------------------------------------------------------------------------------------------------


def test_ini_groups_children_and_ungrouped() -> None:
    inv = load_inventory(DATA / "basic.ini")
    assert inv.groups["ungrouped"].hosts == ["lonely.example.com", "mgmt.example.com"]
    assert inv.groups["gpu"].hosts == [
        "gpu1.example.com",
        "gpu2.example.com",
        "gpu-03.example.com",
        "gpu-04.example.com",
    ]
    assert inv.groups["compute"].children == ["gpu", "cpu"]
    assert inv.groups["gpu"].parents == ["compute"]
    assert inv.hosts["gpu1.example.com"].groups == ["all", "compute", "gpu"]


def test_ini_typed_and_quoted_values() -> None:
    inv = load_inventory(DATA / "basic.ini")
    gpu2 = inv.hosts["gpu2.example.com"]
    assert gpu2.vars["gpu_count"] == 8  # [gpu:vars] beats [compute:vars] (child over parent)
    assert gpu2.vars["mig_enabled"] is False
    assert gpu2.vars["driver_branch"] == "535"
    assert gpu2.vars["note"] == "two words"
    assert gpu2.vars["label"] == "spaces around equals"
    assert gpu2.vars["ansible_become"] == "yes"
    assert gpu2.become is True
    assert gpu2.address == "198.51.100.2"
    assert inv.hosts["mgmt.example.com"].port == 2200


def test_ini_trailing_comment_is_not_a_variable() -> None:
    gpu1 = load_inventory(DATA / "basic.ini").hosts["gpu1.example.com"]
    assert gpu1.user == "ubuntu"
    assert "#" not in json.dumps(gpu1.vars)


def test_ini_ipv6_host_with_port_and_proxy_command_quoting() -> None:
    inv = load_inventory(DATA / "basic.ini")
    v6 = inv.hosts["2001:db8::10"]
    assert (v6.address, v6.port) == ("2001:db8::10", 2200)
    cpu1 = inv.hosts["cpu1.example.com"]
    assert cpu1.port == 2222
    assert cpu1.proxy_command == "ssh -W %h:%p -q admin@bastion.example.com"
    assert cpu1.jump == "admin@bastion.example.com"


def test_ini_children_naming_an_undeclared_group_creates_it(tmp_path: Path) -> None:
    inv_file = tmp_path / "hosts.ini"
    inv_file.write_text("[gpu:children]\nlater\n\n[gpu]\ngpu1\n")
    inv = load_inventory(inv_file)
    assert inv.groups["later"].hosts == []
    assert inv.groups["later"].parents == ["gpu"]


# --- format detection and directories -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("hosts", "# comment\n[gpu]\ngpu1\n", "ini"),
        ("hosts", "gpu1 ansible_host=192.0.2.1\n", "ini"),
        ("hosts", "---\nall:\n  hosts:\n", "yaml"),
        ("hosts", "all:\n  hosts:\n", "yaml"),
        ("hosts.yaml", "[gpu]\n", "yaml"),
        ("hosts.ini", "all:\n", "ini"),
    ],
)
def test_detect_format(name: str, text: str, expected: str) -> None:
    assert detect_format(Path(name), text) == expected


def test_extensionless_yaml_file_loads(tmp_path: Path) -> None:
    (tmp_path / "hosts").write_text("gpu:\n  hosts:\n    gpu1:\n      ansible_port: 2201\n")
    assert load_inventory(tmp_path / "hosts").hosts["gpu1"].port == 2201


def test_directory_merges_files_and_skips_readme() -> None:
    inv = load_inventory(DATA / "multi")
    assert names(inv) == ["cloud-1.example.com", "onprem-1.example.com"]
    assert inv.groups["gpu"].hosts == ["cloud-1.example.com", "onprem-1.example.com"]
    onprem = inv.hosts["onprem-1.example.com"]
    assert onprem.vars["site"] == "onprem"  # [onprem:vars] (ini) beats gpu vars (yaml): o > g at equal depth
    assert onprem.vars["rack"] == "r12"  # host_vars file without extension
    assert onprem.vars["nfs_server"] == "nfs.example.com"
    assert inv.hosts["cloud-1.example.com"].vars["site"] == "cloud"


def test_several_sources_merge_in_order() -> None:
    inv = load_inventory([DATA / "nested.yml", DATA / "basic.ini"])
    assert "node8" in inv.hosts and "cpu1.example.com" in inv.hosts
    assert inv.groups["gpu"].children == ["a100", "h100"]
    assert "gpu1.example.com" in inv.groups["gpu"].hosts
    assert inv.hosts["gpu1.example.com"].groups == ["all", "compute", "gpu"]


def test_source_as_plain_string_is_one_path() -> None:
    inv = load_inventory(str(DATA / "basic.ini"))
    assert "cpu1.example.com" in inv.hosts


# --- variable precedence ------------------------------------------------------------------------------------


def test_precedence_host_vars_file_beats_everything() -> None:
    gpu1 = load_inventory(DATA / "precedence").hosts["gpu1"]
    assert gpu1.vars["level"] == "gpu1-file"


def test_precedence_group_files_beat_inline_and_dir_files_merge_sorted() -> None:
    gpu2 = load_inventory(DATA / "precedence").hosts["gpu2"]
    # a100's group_vars dir (deepest group file) wins over every inline group var, incl. h100's
    assert gpu2.vars["level"] == "a100-dir-10"
    assert gpu2.vars["which"] == "second"  # 20-second.yml after 10-first.yml
    assert "notes" not in json.dumps(gpu2.vars)  # .txt files in a vars dir are ignored


def test_precedence_equal_depth_is_alphabetical() -> None:
    inv = load_inventory(DATA / "precedence")
    assert inv.hosts["gpu2"].vars["tie"] == "h100"  # h100 sorts after a100, so it wins
    assert inv.hosts["gpu1"].vars["tie"] == "a100"


def test_precedence_dicts_are_replaced_not_merged() -> None:
    gpu2 = load_inventory(DATA / "precedence").hosts["gpu2"]
    assert gpu2.vars["dict_var"] == {"b": 2}  # group_vars/all.yml replaces h100's inline {"a": 1}


def test_precedence_all_and_parent_vars_are_inherited() -> None:
    gpu1 = load_inventory(DATA / "precedence").hosts["gpu1"]
    assert gpu1.vars["from_all_inline"] == "all-inline"
    assert gpu1.vars["from_all_file"] is True
    assert gpu1.vars["gpu_inline"] == "yes"
    assert gpu1.vars["gpu_file"] == "yes"
    assert gpu1.vars["a100_inline"] == 1


def test_group_priority_overrides_alphabetical_order(tmp_path: Path) -> None:
    (tmp_path / "hosts.ini").write_text(
        "[a]\nn1\n[b]\nn1\n[a:vars]\nx=from-a\nansible_group_priority=10\n[b:vars]\nx=from-b\n"
    )
    assert load_inventory(tmp_path / "hosts.ini").hosts["n1"].vars["x"] == "from-a"


def test_group_vars_beside_a_single_file_are_loaded(tmp_path: Path) -> None:
    shutil.copy(DATA / "precedence" / "hosts.ini", tmp_path / "site.ini")
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "h100.json").write_text('{"level": "h100-json"}')
    assert load_inventory(tmp_path / "site.ini").hosts["gpu2"].vars["level"] == "h100-json"


@pytest.mark.parametrize(
    ("fixture", "source"), [("nested", "nested.yml"), ("basic", "basic.ini"), ("precedence", "precedence")]
)
def test_same_result_as_ansible_inventory(fixture: str, source: str) -> None:
    """Expected files come from ansible-core 2.19: ansible-inventory --list, --list --export, --graph."""
    inv = load_inventory(DATA / source)
    ours = inv.to_ansible_list()
    listed = json.loads((DATA / "expected" / f"{fixture}.list.json").read_text())
    exported = json.loads((DATA / "expected" / f"{fixture}.export.json").read_text())
    assert ours["_meta"]["hostvars"] == listed["_meta"]["hostvars"]
    for group, entry in listed.items():
        if group != "_meta":
            assert {k: v for k, v in ours[group].items() if k != "vars"} == entry, group
            assert ours[group].get("vars", {}) == exported[group].get("vars", {}), group
    assert inv.graph() == (DATA / "expected" / f"{fixture}.graph.txt").read_text().rstrip("\n")


# --- the example inventories shipped in inventory/ ---------------------------------------------------------


def test_example_aws_inventory() -> None:
    inv = load_inventory(EXAMPLES / "aws-gpu.yml")
    p4d = inv.hosts["p4d-01"]
    assert isinstance(p4d, Host)
    assert (p4d.address, p4d.user, p4d.become) == ("198.51.100.11", "ubuntu", True)
    assert p4d.jump == "ec2-user@bastion.aws.example.com"
    assert p4d.vars["gpu_count"] == 8
    assert p4d.vars["driver_branch"] == "535"  # inventory/group_vars/all.yml
    assert [h.name for h in inv.select("g5")] == [f"g5-0{i}.gpu.aws.example.com" for i in (1, 2, 3)]


def test_example_aliyun_inventory() -> None:
    inv = load_inventory(EXAMPLES / "aliyun-gpu.ini")
    node = inv.hosts["gn7-a100-02"]
    assert node.user == "root"
    assert node.jump == "jumper@bastion.aliyun.example.com"
    assert node.proxy_command is not None and "%h:%p" in node.proxy_command
    assert node.jump_key_file is not None and node.jump_key_file.endswith("aliyun-bastion.pem")
    assert node.vars["gpu_count"] == 4  # host var beats [gn7:vars]
    assert inv.hosts["gn7-a100-01"].vars["gpu_count"] == 8
    assert inv.groups["gpu"].children == ["gn7", "gn7i"]
    assert node.vars["nfs_server"] == "192.0.2.50"


def test_example_directory_loads_both_clouds() -> None:
    inv = load_inventory(EXAMPLES)
    assert {"gpu", "gpu_nodes"} <= set(inv.groups["all"].children)
    assert len(inv.hosts) == 9
    assert all(h.vars["driver_branch"] == "535" for h in inv.hosts.values())
    assert all(h.jump for h in inv.hosts.values())


def test_an_ini_inventory_saved_with_a_byte_order_mark_reads_as_without(tmp_path: Path) -> None:
    path = tmp_path / "hosts"
    path.write_bytes(b"\xef\xbb\xbf[gpu]\nnode-1 ansible_host=10.0.0.5\n")
    inv = load_inventory(path)
    assert names(inv) == ["node-1"] and inv.hosts["node-1"].address == "10.0.0.5"
