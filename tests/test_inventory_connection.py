"""Connection settings from native and Ansible variable names, ssh argument strings, and secret hiding."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gpunode.errors import UsageError
from gpunode.inventory import MASK, Host, is_secret_key, load_inventory, redacted_vars
from gpunode.inventory.layers import Origin
from gpunode.inventory.sshargs import jump_from_proxy_command, parse_ssh_args

DATA = Path(__file__).parent / "data" / "inventory"
HOME = os.path.expanduser("~")


@pytest.fixture(scope="module")
def hosts() -> dict[str, Host]:
    return load_inventory(DATA / "connection.yml").hosts


def test_proxy_command_through_bastion_derives_jump(hosts: dict[str, Host]) -> None:
    node = hosts["pc-node"]
    assert node.jump == "ops@bastion.example.com:2222"
    assert node.jump_key_file == f"{HOME}/.ssh/bastion.pem"
    assert node.proxy_command == (
        "ssh -o StrictHostKeyChecking=no -W %h:%p -q -p 2222 -i ~/.ssh/bastion.pem ops@bastion.example.com"
    )
    assert (node.address, node.user, node.key_file) == ("198.51.100.20", "ubuntu", f"{HOME}/.ssh/fleet.pem")


def test_proxy_jump_option_keeps_multi_hop_spec(hosts: dict[str, Host]) -> None:
    node = hosts["pj-node"]
    assert node.jump == "jump@bastion.example.com:2200,ops@inner.example.com"
    assert node.proxy_command is None


def test_dash_j_and_port_flag(hosts: dict[str, Host]) -> None:
    node = hosts["j-node"]
    assert node.jump == "admin@203.0.113.5"
    assert node.port == 2022  # -p in ssh args, no port variable set
    assert node.user == "ubuntu"  # an explicit user variable beats -l in ssh args


def test_native_names(hosts: dict[str, Host]) -> None:
    node = hosts["native-node"]
    assert node.jump == "ops@native-bastion.example.com"
    assert node.proxy_command is None  # the native jump replaces the group's ProxyCommand
    # the group's ansible_ssh_private_key_file wins over the host's short `key`: ansible_* names always win
    assert node.key_file == f"{HOME}/.ssh/fleet.pem"
    assert node.user == "root"  # host-level ansible_user beats group-level native user


def test_ansible_names_win_over_short_names(hosts: dict[str, Host]) -> None:
    """Issue 15 item 3: an app's `user`/`port` variables never change the SSH login over ansible_user."""
    node = hosts["both-levels"]
    assert (node.user, node.port) == ("admin", 2222)
    assert node.vars["user"] == "app-user"  # still there for templates


def test_group_ansible_user_beats_host_short_user(tmp_path: Path) -> None:
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("[app]\nweb1 ansible_host=192.0.2.1 user=postgres port=5432\n\n"
                         "[app:vars]\nansible_user=deploy\n")
    node = load_inventory(inventory).hosts["web1"]
    assert (node.user, node.port) == ("deploy", 5432)  # no ansible_port anywhere: the short name applies



def test_non_ssh_proxy_command_is_kept_without_jump(hosts: dict[str, Host]) -> None:
    node = hosts["nc-node"]
    assert node.proxy_command == "nc -X 5 -x proxy.example.com:1080 %h %p"
    assert node.jump is None


def test_jump_none_opts_out_of_group_bastion(hosts: dict[str, Host]) -> None:
    assert (hosts["opt-out"].jump, hosts["opt-out"].proxy_command) == (None, None)


def test_local_detection(hosts: dict[str, Host]) -> None:
    assert hosts["localhost"].local is True
    assert hosts["local-by-var"].local is True
    assert hosts["loopback-ssh"].local is False
    assert hosts["pc-node"].local is False


def test_string_port_and_become_and_known_hosts(hosts: dict[str, Host]) -> None:
    node = hosts["secret-node"]
    assert node.port == 2222
    assert node.become is True
    assert node.password == "hunter2"
    assert node.become_password == "s3cr3t-become"
    assert node.known_hosts == f"{HOME}/.ssh/fleet_known_hosts"


def test_secrets_never_in_repr(hosts: dict[str, Host]) -> None:
    text = repr(hosts["secret-node"]) + str(hosts["secret-node"])
    for secret in ("hunter2", "s3cr3t-become", "tok-123"):
        assert secret not in text
    assert "192.0.2.77" in text


def test_secrets_redacted_in_ansible_list() -> None:
    listed = load_inventory(DATA / "connection.yml").to_ansible_list()
    text = json.dumps(listed)
    for secret in ("hunter2", "s3cr3t-become", "tok-123"):
        assert secret not in text
    hostvars = listed["_meta"]["hostvars"]["secret-node"]
    assert hostvars["ansible_password"] == MASK
    assert hostvars["api_token"] == MASK
    assert hostvars["ansible_host"] == "192.0.2.77"


@pytest.mark.parametrize(
    "name",
    [
        "ansible_ssh_pass",
        "ansible_password",
        "become_pass",
        "aws_secret_access_key",
        "github_token",
        "api_key",
        "x_passphrase",
    ],
)
def test_secret_names(name: str) -> None:
    assert is_secret_key(name)


@pytest.mark.parametrize(
    "name", ["ansible_user", "ansible_ssh_private_key_file", "key", "known_hosts", "nfs_server"]
)
def test_not_secret_names(name: str) -> None:
    assert not is_secret_key(name)


def test_redacted_vars_nested_and_pem_values() -> None:
    original = {
        "db": {"user": "app", "password": "pw"},
        "tls_key": "-----BEGIN RSA PRIVATE KEY-----\nabc\n-----END RSA PRIVATE KEY-----",
        "users": [{"name": "a", "token": "t"}],
        "empty_password": "",
    }
    out = redacted_vars(original)
    assert out == {
        "db": {"user": "app", "password": MASK},
        "tls_key": MASK,
        "users": [{"name": "a", "token": MASK}],
        "empty_password": "",
    }
    assert original["db"]["password"] == "pw"  # the input is not modified


# --- ssh argument strings -----------------------------------------------------------------------------------

ORIGIN = Origin("hosts.yml", 3)


@pytest.mark.parametrize(
    ("command", "jump", "key"),
    [
        ("ssh -W %h:%p -q user@bastion", "user@bastion", None),
        ("ssh -q -W %h:%p -p 2200 -i ~/.ssh/b.pem ops@198.51.100.1", "ops@198.51.100.1:2200", "~/.ssh/b.pem"),
        ("/usr/bin/ssh -W %h:%p bastion.example.com", "bastion.example.com", None),
        ("ssh -W %h:%p -l ops -o Port=2201 bastion", "ops@bastion:2201", None),
        ("ssh -W %h:%p ssh://ops@bastion:2202", "ops@bastion:2202", None),
        ("ssh -W %h:%p admin@2001:db8::1", "admin@[2001:db8::1]", None),
        ("ssh -W [%h]:%p bastion", None, None),
        ("ssh user@bastion nc %h %p", None, None),
        ("ssh -F ./cfg -W %h:%p bastion", None, None),
        ("ssh -W %h:%p -J other bastion", None, None),
        ("nc -x proxy:1080 %h %p", None, None),
        ("ssh -W %h:%p 'unclosed", None, None),
    ],
)
def test_jump_from_proxy_command(command: str, jump: str | None, key: str | None) -> None:
    assert jump_from_proxy_command(command) == (jump, key)


def test_parse_ssh_args_options_and_first_value_wins() -> None:
    opts = parse_ssh_args(
        "-o Port=2200 -p 2300 -oUser=ops -i ~/.ssh/k -o StrictHostKeyChecking=no -o ProxyJump=j1", ORIGIN
    )
    assert (opts.port, opts.user, opts.key_file, opts.jump) == ("2200", "ops", "~/.ssh/k", "j1")


def test_parse_ssh_args_first_proxy_wins() -> None:
    opts = parse_ssh_args("-J first -o ProxyCommand='ssh -W %h:%p second'", ORIGIN)
    assert (opts.jump, opts.proxy_command) == ("first", None)
    opts = parse_ssh_args("-o 'ProxyCommand ssh -W %h:%p second' -J first", ORIGIN)
    assert (opts.jump, opts.proxy_command) == ("second", "ssh -W %h:%p second")


def test_parse_ssh_args_proxy_none() -> None:
    opts = parse_ssh_args("-o ProxyJump=none -J later", ORIGIN)
    assert (opts.jump, opts.proxy_command) == (None, None)


def test_parse_ssh_args_unclosed_quote_names_origin() -> None:
    with pytest.raises(UsageError) as info:
        parse_ssh_args("-o ProxyCommand='ssh", ORIGIN)
    assert (info.value.source, info.value.line) == ("hosts.yml", 3)
    assert "hosts.yml:3" in str(info.value)


def test_extra_args_combine_with_common_args(tmp_path: Path) -> None:
    inv_file = tmp_path / "hosts.ini"
    common = "ansible_ssh_common_args='-o ServerAliveInterval=5'"
    inv_file.write_text(f"[gpu]\nn1 {common} ansible_ssh_extra_args='-J ops@192.0.2.9:2222'\n")
    assert load_inventory(inv_file).hosts["n1"].jump == "ops@192.0.2.9:2222"


@pytest.mark.parametrize(("pattern", "local"), [
    ("localhost", True), ("127.0.0.1", True), ("root@127.0.0.1", True),
    ("root@127.0.0.1:2222", False), ("localhost:2222", False),  # a tunnel or a forwarded VM: an SSH server
])
def test_a_port_on_localhost_means_ssh_not_this_machine(pattern: str, local: bool) -> None:
    from gpunode.inventory.adhoc import adhoc_inventory

    (host,) = adhoc_inventory(pattern).hosts.values()
    assert host.local is local, host
