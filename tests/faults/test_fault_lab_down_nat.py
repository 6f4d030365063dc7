"""lab-down removes the NAT rule that lab-up made, whatever subnet it used (issue 37: a lab started with `--subnet`
and taken down with `lab-down --tag` left its MASQUERADE rule, as down() rebuilt the rule from the default subnet).
Guards: gpunode/lab/network.py `LabNetwork.down`."""

from __future__ import annotations

import subprocess

import pytest

from gpunode.lab.lab import DEFAULT_SUBNET
from gpunode.lab.network import LabNetwork
from tests.conftest import LAB_TAG, run_cli

pytestmark = pytest.mark.lab

SUBNET = "10.231.77.0/24"  # neither the default nor the test lab's


def test_lab_down_by_tag_removes_the_rule_of_another_subnet():
    tag = LAB_TAG[:5] + "n"
    network = LabNetwork(tag, SUBNET)
    assert SUBNET != DEFAULT_SUBNET
    try:
        network.up()  # what lab-up --subnet makes before its hosts: the bridge and the NAT rule
        assert network.nat_rules() == [["-s", SUBNET, "!", "-o", network.bridge, "-j", "MASQUERADE"]]
        result = run_cli("lab-down", "--tag", tag)
        assert result.code == 0, result.output
        nat = subprocess.run(["iptables", "-w", "-t", "nat", "-S", "POSTROUTING"], capture_output=True, text=True)
        assert network.bridge not in nat.stdout and SUBNET not in nat.stdout
        links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
        assert f" {network.bridge}:" not in links
    finally:
        network.down()
