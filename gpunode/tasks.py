"""The tasks behind both `invoke` (tasks.py at the repo top) and the `gpunode` console script."""

from __future__ import annotations

import sys

from invoke import Collection, task
from invoke.exceptions import Exit
from invoke.tasks import Task

from gpunode.commands.common import cli_errors


class GTask(Task):
    """A task whose short flags are given explicitly (`-i` inventory, `-H` hosts) instead of guessed."""

    SHORT = {"inventory": "i", "hosts": "H", "limit": "l", "check": "C", "forks": "f", "verbose": "v"}

    def arg_opts(self, name, default, taken_names):  # type: ignore[override]
        opts = super().arg_opts(name, default, taken_names)
        opts["names"] = [opts["names"][0]] + ([self.SHORT[name]] if name in self.SHORT else [])
        return opts


def gtask(*args, **kwargs):
    return task(*args, klass=GTask, auto_shortflags=False, **kwargs)


CONN_HELP = {
    "inventory": "inventory file or folder (YAML or INI, Ansible-compatible); repeatable",
    "hosts": "ad-hoc hosts: host1,user@host2:2222",
    "limit": "limit to a pattern: group, host, glob, !exclude, &intersect",
}
KEYS_HELP = {"accept_new_host_keys": "trust unknown host keys on first use (recorded in gpunode's known_hosts)"}


@gtask(iterable=["inventory", "var"], help={
    **CONN_HELP, **KEYS_HELP, "playbook": "playbook YAML (default playbooks/base.yml)",
    "check": "show what would change, with diffs; change nothing",
    "forks": "hosts in parallel (default 10)", "var": "extra variable KEY=VALUE; repeatable",
    "json_report": "write a JSON report here", "junit": "write JUnit XML here",
    "verbose": "plain log lines with command output",
    "log_dir": "per-host logs folder (default .gpunode/logs/<time>)",
})
def provision(c, inventory=None, hosts=None, playbook="playbooks/base.yml", limit=None, check=False, forks=10,
              var=None, json_report=None, junit=None, accept_new_host_keys=False, verbose=False, log_dir=None):
    """Run a playbook on hosts: facts once, plan, apply; idempotent, parallel, exit 0/1/2."""
    from gpunode.commands.provision import provision as run

    with cli_errors():
        code = run(inventory or [], hosts, playbook, limit, check, forks, var or [], json_report, junit,
                   accept_new_host_keys, verbose, log_dir)
    if code:
        raise Exit(code=code)


@gtask(positional=["target"], iterable=["inventory"], help={
    "inventory": CONN_HELP["inventory"], **KEYS_HELP, "json": "print JSON",
    "target": "host(s): a pattern of the inventory given with -i, else ad-hoc user@host[:port],...",
})
def facts(c, target, inventory=None, json=False, accept_new_host_keys=False):
    """Gather facts (OS, kernel, GPUs, driver, runtimes, mounts, locks...) in one round trip and print them."""
    from gpunode.commands.facts_cmd import show_facts

    with cli_errors():
        hosts, limit = (None, target) if inventory else (target, None)
        code = show_facts(inventory or [], hosts, limit, json, accept_new_host_keys)
    if code:
        raise Exit(code=code)


@gtask(name="inventory", iterable=["inventory"], help={
    **CONN_HELP, "list": "all groups, hosts and host variables as JSON (default)", "graph": "a tree of groups",
    "host": "one host's resolved variables", "json": "JSON output for --host",
})
def inventory_(c, inventory=None, hosts=None, limit=None, list=False, graph=False, host=None, json=False):
    """Show the inventory like ansible-inventory: --list, --graph, --host H."""
    from gpunode.commands.inventory_cmd import show_inventory

    with cli_errors():
        print(show_inventory(inventory or [], hosts, limit, graph, host, json))


@gtask(help={"hosts": "how many hosts (default 3)", "tag": "lab name (default demo)",
             "subnet": "lab subnet (default 10.231.1.0/24)", "mirror": "Debian mirror URL (default: this machine's)",
             "nfs": "also start the lab's NFS server (nfs-ganesha + rpcbind in its own namespace)"})
def lab_up(c, hosts=3, tag="demo", subnet="10.231.1.0/24", mirror=None, nfs=False):
    """Start local lab hosts (systemd-nspawn, Debian 12, sshd) and write their inventory."""
    from gpunode.lab.lab import Lab

    lab = Lab(tag, subnet, mirror)
    started = lab.up(int(hosts))
    for host in started:
        print(f"{host.name}  {host.address}")
    print(f"inventory: {lab.inventory_path}")
    if nfs:
        from gpunode.lab.nfs import LabNfsServer

        server = LabNfsServer(lab.network, lab.directory).up()
        print(f"nfs server: {server.address}  export: {server.export} (NFSv3 and v4)")


@gtask(help={"tag": "lab name (default demo)"})
def lab_down(c, tag="demo"):
    """Stop the lab's hosts and remove their disks and network."""
    from gpunode.lab.lab import Lab

    Lab(tag).down()
    print(f"lab {tag} is down")


NFS_HELP = {
    "server": "NFS server or mount target (name or address)", "export": "exported path, e.g. / or /data",
    "path": "local mount point, e.g. /mnt/data", "vendor": "alibaba-nas, tencent-cfs, aws-efs or generic (default)",
    "nfs_version": "3, 4.0, 4.1 or 4.2 (default: the vendor's recommended one)",
    "options": "mount options that override the vendor preset key by key, e.g. soft,timeo=150",
}


@gtask(positional=["target"], iterable=["inventory"], help={
    "target": "host(s): a pattern of the inventory given with -i, else ad-hoc user@host[:port],...",
    "inventory": CONN_HELP["inventory"], **KEYS_HELP, **NFS_HELP, "check": "show what would change, change nothing",
    "automount": "mount on first access (x-systemd.automount): boots never wait for the NAS",
    "absent": "unmount (refused while busy) and remove gpunode's fstab line",
    "fstab_only": "only manage the fstab line (e.g. for an image being baked); no mount or unmount now",
    "write_test": "after mounting, write a file on the share, read it back and delete it",
    "no_preflight": "skip the DNS / port / export checks", "forks": "hosts in parallel (default 10)",
    "json_report": "write a JSON report here", "junit": "write JUnit XML here", "verbose": "plain log lines",
    "log_dir": "per-host logs folder (default .gpunode/logs/<time>)",
})
def mount_nfs(c, target, inventory=None, server=None, export=None, path=None, vendor="generic", nfs_version=None,
              options=None, automount=False, absent=False, check=False, fstab_only=False, write_test=False,
              no_preflight=False, forks=10, json_report=None, junit=None, accept_new_host_keys=False,
              verbose=False, log_dir=None):
    """Mount an NFS share (Alibaba NAS, Tencent CFS, AWS EFS, plain NFS) on hosts: preflight, fstab, mount, verify."""
    from gpunode.commands.nfs_cmd import mount_nfs as run
    from gpunode.commands.nfs_cmd import nfs_args

    with cli_errors():
        hosts, limit = (None, target) if inventory else (target, None)
        args = nfs_args(server, export, path, vendor, nfs_version, options, automount=automount or None,
                        state="absent" if absent else None, fstab_only=fstab_only or None,
                        write_test=write_test or None, preflight=False if no_preflight else None)
        code = run(inventory or [], hosts, limit, args, check, int(forks), json_report, junit,
                   accept_new_host_keys, verbose, log_dir)
    if code:
        raise Exit(code=code)


@gtask(help={**{k: v for k, v in NFS_HELP.items() if k != "path"},
             "name": "name of the PersistentVolume and its claim", "size": "capacity (default 1Ti)",
             "namespace": "namespace of the claim (default default)"})
def nfs_volume(c, server=None, export=None, name=None, vendor="generic", nfs_version=None, options=None,
               size="1Ti", namespace="default"):
    """Print a Kubernetes PersistentVolume + PersistentVolumeClaim (ReadWriteMany) for an NFS share."""
    from gpunode.commands.nfs_cmd import nfs_args
    from gpunode.commands.nfs_cmd import nfs_volume as make

    with cli_errors():
        args = nfs_args(server, export, f"/mnt/{name or 'nfs'}", vendor, nfs_version, options)
        if not name:
            from gpunode.errors import UsageError

            raise UsageError("nfs-volume needs --name", fix="e.g. --name datasets")
        print(make(args, name, size, namespace), end="")



@gtask(positional=["target"], iterable=["inventory"], help={
    "target": "host(s): a pattern of the inventory given with -i, else ad-hoc host1,user@host2",
    "inventory": CONN_HELP["inventory"], **KEYS_HELP,
    "expect_gpus": "expected GPU count (default: inventory var expect_gpus)",
    "expect_model": "expected model text, e.g. H100 (default: inventory var expect_model)",
    "min_driver": "minimum driver version, e.g. 535.104 (default: inventory var min_driver)",
    "container_test": "run `docker run --gpus all` (default: when docker is installed and GPUs exist)",
    "json": "print the JSON report", "junit": "write JUnit XML here",
})
def verify_gpu(c, target, inventory=None, expect_gpus=None, expect_model=None, min_driver=None,
               container_test=None, json=False, junit=None, accept_new_host_keys=False):
    """Check GPUs, driver, fabric manager, kernel log and container runtime: exit 0 healthy, 1 not, 2 unreachable."""
    from gpunode.commands.verify_cmd import VerifyOptions
    from gpunode.commands.verify_cmd import verify_gpu as run
    from gpunode.verify import Expectations

    expect = Expectations(int(expect_gpus) if expect_gpus else None, expect_model, min_driver)
    with cli_errors():
        code = run(inventory or [], target, VerifyOptions(expect, container_test), json, junit, accept_new_host_keys)
    if code:
        raise Exit(code=code)


@gtask(iterable=["file"], help={
    "file": "a saved output (nvidia-smi -q -x / -q / table / csv, lspci -nn, dmesg, error text) or a folder; "
            "repeatable", "json": "print JSON", "expect_gpus": "expected GPU count", "expect_model": "expected model",
})
def diagnose(c, file=None, json=False, expect_gpus=None, expect_model=None):
    """Analyse saved outputs offline, recognising each file's kind from its content."""
    from gpunode.commands.verify_cmd import diagnose as run
    from gpunode.verify import Expectations

    with cli_errors():
        code = run(file or [], json, Expectations(int(expect_gpus) if expect_gpus else None, expect_model))
    if code:
        raise Exit(code=code)


@gtask(positional=["target"], iterable=["inventory"], help={
    "target": "host(s): inventory pattern with -i, else ad-hoc hosts", "inventory": CONN_HELP["inventory"],
    "output": "folder for the bundles (default .)", **KEYS_HELP,
})
def collect(c, target, inventory=None, output=None, accept_new_host_keys=False):
    """Write a support bundle per host (nvidia-smi outputs, lspci, kernel log, dkms status) as a tar.gz."""
    from gpunode.commands.verify_cmd import collect as run

    with cli_errors():
        for path in run(inventory or [], target, output, accept_new_host_keys):
            print(path)

ns = Collection(provision, facts, inventory_, lab_up, lab_down, verify_gpu, diagnose, collect)
ns.add_task(mount_nfs)
ns.add_task(nfs_volume)


def main() -> None:
    """Entry point of the `gpunode` console script: the same tasks as `invoke`."""
    from invoke import Program

    from gpunode import __version__

    Program(namespace=ns, version=__version__, name="gpunode", binary="gpunode").run(sys.argv)
