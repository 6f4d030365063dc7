"""The lab's network: a bridge with NAT to the outside, and one network namespace per host."""

from __future__ import annotations

import ipaddress
import subprocess
from pathlib import Path


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a local command (no shell); raise with its stderr when it fails and check is set."""
    result = subprocess.run(args, capture_output=True, text=True)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed: {result.stderr.strip() or result.stdout.strip()}")
    return result


class SubnetInUse(ValueError):
    """Another interface (usually another lab's bridge) already has an address in this lab's subnet."""


class LabNetwork:
    """Bridge `br<tag>` on `subnet`: .1 is the gateway, hosts get addresses from .10 up."""

    def __init__(self, tag: str, subnet: str) -> None:
        self.tag = tag
        self.subnet = ipaddress.ip_network(subnet)
        self.bridge = f"gnbr-{tag}"
        self.gateway = str(self.subnet.network_address + 1)

    def address(self, index: int) -> str:
        return str(self.subnet.network_address + 10 + index)

    def up(self) -> None:
        """Create the bridge and NAT (idempotent); refuse a subnet that another interface already uses."""
        self.check_subnet_free()
        if sh("ip", "link", "show", self.bridge, check=False).returncode != 0:
            sh("ip", "link", "add", self.bridge, "type", "bridge")
        sh("ip", "addr", "replace", f"{self.gateway}/{self.subnet.prefixlen}", "dev", self.bridge)
        sh("ip", "link", "set", self.bridge, "up")
        Path("/proc/sys/net/ipv4/ip_forward").write_text("1\n")
        rule = ["-s", str(self.subnet), "!", "-o", self.bridge, "-j", "MASQUERADE"]
        if sh("iptables", "-w", "-t", "nat", "-C", "POSTROUTING", *rule, check=False).returncode != 0:
            sh("iptables", "-w", "-t", "nat", "-A", "POSTROUTING", *rule)

    def check_subnet_free(self) -> None:
        """Two labs on one subnet get the same addresses on two bridges: connections then reach the other lab's
        host (host key "changed", or authentication cut off mid-way). Refuse instead."""
        listing = sh("ip", "-o", "-4", "addr", "show", check=False).stdout
        for line in listing.splitlines():
            fields = line.split()
            if len(fields) < 4 or fields[2] != "inet" or fields[1] == self.bridge:
                continue
            interface = ipaddress.ip_interface(fields[3])
            if interface.network.overlaps(self.subnet):
                raise SubnetInUse(f"subnet {self.subnet} is already used by {fields[1]} ({fields[3]}), "
                                  "another lab or network on this machine")

    def down(self) -> None:
        """Remove this lab's NAT rules, whatever subnet they were made for (a lab started with `--subnet` and taken
        down by tag alone), and its bridge."""
        for rule in self.nat_rules():
            sh("iptables", "-w", "-t", "nat", "-D", "POSTROUTING", *rule, check=False)
        sh("ip", "link", "del", self.bridge, check=False)

    def nat_rules(self) -> list[list[str]]:
        """This lab's MASQUERADE rules in POSTROUTING (`! -o <bridge>`), as arguments for `iptables -D`."""
        listed = sh("iptables", "-w", "-t", "nat", "-S", "POSTROUTING", check=False).stdout.splitlines()
        return [line.split()[2:] for line in listed
                if line.startswith("-A POSTROUTING ") and f"! -o {self.bridge} " in line and "MASQUERADE" in line]

    def netns_name(self, name: str) -> str:
        return f"gn-{self.tag}-{name}"

    def veth_name(self, index: int) -> str:
        return f"gnv{self.tag}{index}"[:15]

    def attach(self, name: str, index: int) -> str:
        """A fresh namespace for host `name` with eth0 on the bridge; returns its /run/netns path."""
        ns, veth, address = self.netns_name(name), self.veth_name(index), self.address(index)
        self.detach(name, index)
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
        sh("ip", "link", "set", veth, "master", self.bridge, "up")
        inside = ("ip", "netns", "exec", ns)
        sh(*inside, "ip", "addr", "add", f"{address}/{self.subnet.prefixlen}", "dev", "eth0")
        sh(*inside, "ip", "link", "set", "eth0", "up")
        sh(*inside, "ip", "link", "set", "lo", "up")
        sh(*inside, "ip", "route", "add", "default", "via", self.gateway)
        return f"/run/netns/{ns}"

    def detach(self, name: str, index: int) -> None:
        """Remove the host's namespace and veth, and forget its ARP entry (else a restart stalls ~20 s)."""
        sh("ip", "link", "del", self.veth_name(index), check=False)
        sh("ip", "netns", "del", self.netns_name(name), check=False)
        sh("ip", "neigh", "flush", "to", self.address(index), check=False)

    def cut(self, name: str, down: bool = True) -> None:
        """Take the host's link down (or up again): a network cut for fault tests."""
        sh("ip", "netns", "exec", self.netns_name(name), "ip", "link", "set", "eth0", "down" if down else "up")
