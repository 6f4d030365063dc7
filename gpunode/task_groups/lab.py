"""The local lab's tasks: lab-up, lab-down, lab-base-image, and the checks of their options."""

from __future__ import annotations

import os
import sys

from gpunode.commands.common import cli_errors
from gpunode.errors import GpunodeError, UsageError
from gpunode.task_groups.base import _positive, gtask


@gtask(help={"hosts": "how many hosts (default 3)", "tag": "lab name (default demo)",
             "subnet": "lab subnet (default 10.231.1.0/24)", "mirror": "Debian mirror URL (default: this machine's)",
             "nfs": "also start the lab's NFS server (nfs-ganesha + rpcbind in its own namespace)",
             "suite": "Debian suite of the hosts: bookworm (12, default), trixie (13), sid (unstable) or bullseye "
                      "(11: python3 is 3.9)"})
def lab_up(c, hosts=3, tag="demo", subnet="10.231.1.0/24", mirror=None, nfs=False, suite="bookworm"):
    """Start local lab hosts (systemd-nspawn, Debian 12 or another suite, sshd) and write their inventory."""
    from gpunode.lab.lab import Lab

    with cli_errors():
        _lab_needs_root("lab-up")
        lab = Lab(_lab_tag(tag), _lab_subnet(subnet), mirror)
        count = _positive("--hosts", hosts)
        suite = _lab_suite(suite)
    try:
        started = lab.up(count, suite=suite)
    except ValueError as exc:  # e.g. the subnet is another lab's
        with cli_errors():
            raise UsageError(str(exc), source="--subnet", fix="give this lab its own subnet, e.g. --subnet "
                             "10.231.N.0/24 with an N no other lab uses (ip -4 addr shows the used ones)") from None
    except RuntimeError as exc:  # mmdebstrap, nspawn or sshd failed: the cause is in the message
        with cli_errors():
            raise GpunodeError(f"lab-up failed: {exc}", fix="read the cause above; check --mirror and that "
                               "systemd-nspawn, mmdebstrap and iptables work here") from None
    for host in started:
        print(f"{host.name}  {host.address}  {host.suite}")
    print(f"inventory: {lab.inventory_path}")
    if nfs:
        from gpunode.lab.nfs import LabNfsServer

        server = LabNfsServer(lab.network, lab.directory).up()
        print(f"nfs server: {server.address}  export: {server.export} (NFSv3 and v4)")


@gtask(help={"tag": "lab name (default demo)"})
def lab_down(c, tag="demo"):
    """Stop the lab's hosts and remove their disks and network."""
    from gpunode.lab.lab import Lab

    with cli_errors():
        _lab_needs_root("lab-down")
        lab = Lab(_lab_tag(tag))
    lab.down()
    print(f"lab {tag} is down")


def _lab_needs_root(command: str) -> None:
    """The lab is network namespaces, overlay mounts and containers: root's, refused plainly for anyone else."""
    if os.geteuid() != 0:
        raise GpunodeError(f"{command} needs root: the lab's hosts are systemd-nspawn containers in network "
                           "namespaces, with overlay mounts and NAT rules", fix=f"run it as root, e.g. sudo "
                           f"{sys.argv[0] if os.path.basename(sys.argv[0]) == 'gpunode' else 'gpunode'} {command} ...")


def _lab_tag(tag: object) -> str:
    text = str(tag)
    if not (text.isascii() and text.isalnum() and 1 <= len(text) <= 6):
        raise UsageError(f"lab tag must be 1-6 letters or digits, got {text!r}", source="--tag",
                         fix="use a short name such as lab1 (it becomes part of interface names, 15 characters max)")
    return text


def _lab_suite(suite: object) -> str:
    from gpunode.lab.rootfs import suite_name

    try:
        return suite_name(str(suite))
    except ValueError as exc:
        raise UsageError(str(exc), source="--suite", fix="e.g. --suite trixie") from None


def _lab_subnet(subnet: object) -> str:
    import ipaddress

    try:
        network = ipaddress.IPv4Network(str(subnet), strict=False)
    except ValueError as exc:
        raise UsageError(f"not an IPv4 subnet: {exc}", source="--subnet", fix="e.g. --subnet 10.231.5.0/24") from None
    if network.prefixlen > 24:
        raise UsageError(f"{network} is too small for a lab", source="--subnet", fix="use a /24 or larger")
    return str(subnet)


@gtask(help={"mirror": "Debian mirror URL (default: this machine's)"})
def lab_base_image(c, mirror=None):
    """Build (once, cached) a local Debian 12 cloud image for `build-image --builder qemu`; print its path."""
    from gpunode.lab.cloud_image import ensure_cloud_image

    print(ensure_cloud_image(mirror))
