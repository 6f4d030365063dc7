"""The tasks that work on hosts: provision, facts, inventory, mount-nfs, verify-gpu, diagnose (saved outputs),
collect."""

from __future__ import annotations

from invoke.exceptions import Exit

from gpunode.commands.common import cli_errors
from gpunode.errors import UsageError
from gpunode.task_groups.base import (
    CONN_HELP,
    EXTRA_VARS_HELP,
    KEYS_HELP,
    NFS_HELP,
    PLAYBOOK_HELP,
    _positive,
    _whole,
    gtask,
)


@gtask(iterable=["inventory", "var", "tags", "skip_tags", "extra_vars"], help={
    **CONN_HELP, **KEYS_HELP, "playbook": f"{PLAYBOOK_HELP}; default base",
    "tags": "run only the steps with one of these tags (and those tagged always); comma-separated or repeated",
    "skip_tags": "skip the steps with one of these tags",
    "check": "show what would change, with diffs; change nothing",
    "diff": "also show the diffs of what a real run changed (with --check diffs always show)",
    "ask_become_pass": "ask once for the sudo password of the hosts (Ansible's -K); it reaches sudo only when asked",
    "forks": "hosts in parallel (default 10)", "var": "extra variable KEY=VALUE; repeatable", **{
        "extra_vars": EXTRA_VARS_HELP},
    "json_report": "write a JSON report here", "junit": "write JUnit XML here",
    "verbose": "plain log lines with command output",
    "log_dir": "per-host logs folder (default .gpunode/logs/<time>)",
    "max_diff_size": "the most diff shown and reported per step, in bytes or with K/M (default 100K, as Ansible's "
                     "max_diff_size); what is cut is said",
})
def provision(c, inventory=None, hosts=None, playbook="base", limit=None, check=False, forks=10,
              var=None, json_report=None, junit=None, accept_new_host_keys=False, verbose=False, log_dir=None,
              tags=None, skip_tags=None, extra_vars=None, diff=False, ask_become_pass=False, max_diff_size=None):
    """Run a playbook on hosts: facts once, plan, apply; idempotent, parallel, exit 0/1/2."""
    from gpunode.commands.provision import ProvisionRequest
    from gpunode.commands.provision import provision as run

    with cli_errors():
        request = ProvisionRequest(
            inventory=tuple(inventory or ()), hosts=hosts, playbook=playbook, limit=limit, check=check, forks=forks,
            variables=tuple(var or ()), json_report=json_report, junit=junit,
            accept_new_host_keys=accept_new_host_keys, verbose=verbose, log_dir=log_dir, tags=tuple(tags or ()),
            skip_tags=tuple(skip_tags or ()), extra_vars=tuple(extra_vars or ()), diff=diff,
            ask_become_pass=ask_become_pass, max_diff_size=max_diff_size)
        code = run(request)
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


@gtask(positional=["target"], iterable=["inventory"], help={
    "target": "host(s): a pattern of the inventory given with -i, else ad-hoc user@host[:port],...",
    "inventory": CONN_HELP["inventory"], **KEYS_HELP, **NFS_HELP, "check": "show what would change, change nothing",
    "automount": "mount on first access (x-systemd.automount): boots never wait for the NAS",
    "absent": "unmount (refused while busy) and remove gpunode's fstab line",
    "boot_required": "the boot waits for this mount and fails without it (default: nofail and a 30 s mount "
                     "timeout, so a NAS that is down never holds the boot)",
    "fstab_only": "only manage the fstab line (e.g. for an image being baked); no mount or unmount now",
    "write_test": "after mounting, write a file on the share, read it back and delete it",
    "no_preflight": "skip the DNS / port / export checks", "forks": "hosts in parallel (default 10)",
    "json_report": "write a JSON report here", "junit": "write JUnit XML here", "verbose": "plain log lines",
    "log_dir": "per-host logs folder (default .gpunode/logs/<time>)",
})
def mount_nfs(c, target, inventory=None, server=None, export=None, path=None, vendor="generic", nfs_version=None,
              options=None, automount=False, absent=False, check=False, fstab_only=False, write_test=False,
              no_preflight=False, forks=10, json_report=None, junit=None, accept_new_host_keys=False,
              verbose=False, log_dir=None, boot_required=False):
    """Mount an NFS share (Alibaba NAS, Tencent CFS, AWS EFS, plain NFS) on hosts: preflight, fstab, mount, verify."""
    from gpunode.commands.nfs_cmd import mount_nfs as run
    from gpunode.commands.nfs_cmd import nfs_args

    with cli_errors():
        hosts, limit = (None, target) if inventory else (target, None)
        args = nfs_args(server, export, path, vendor, nfs_version, options, automount=automount or None,
                        state="absent" if absent else None, fstab_only=fstab_only or None,
                        write_test=write_test or None, preflight=False if no_preflight else None,
                        boot_required=boot_required or None)
        code = run(inventory or [], hosts, limit, args, check, _positive("--forks", forks, 1000), json_report, junit,
                   accept_new_host_keys, verbose, log_dir)
    if code:
        raise Exit(code=code)


@gtask(positional=["target"], iterable=["inventory"], help={
    "target": "host(s): a pattern of the inventory given with -i, else ad-hoc host1,user@host2",
    "inventory": CONN_HELP["inventory"], **KEYS_HELP,
    "expect_gpus": "expected GPU count (default: inventory var expect_gpus)",
    "expect_model": "expected model text, e.g. H100 (default: inventory var expect_model)",
    "min_driver": "minimum driver version, e.g. 535.104 (default: inventory var min_driver)",
    "container_test": "run `docker run --gpus all` on every host (default: when docker is installed and GPUs "
                      "exist; `--container-test false` = --no-container-test)",
    "no_container_test": "never run the container test",
    "json": "print the JSON report (evidence in full)", "junit": "write JUnit XML here",
})
def verify_gpu(c, target, inventory=None, expect_gpus=None, expect_model=None, min_driver=None,
               container_test=None, no_container_test=None, json=False, junit=None, accept_new_host_keys=False):
    """Check GPUs, driver, fabric manager, kernel log and container runtime: exit 0 healthy, 1 unhealthy/unreachable."""
    from gpunode.app.verify import VerifyOptions
    from gpunode.commands.verify_cmd import verify_gpu as run
    from gpunode.verify import Expectations

    with cli_errors():
        expect = Expectations(_whole("--expect-gpus", expect_gpus), expect_model, min_driver)
        if container_test and no_container_test:
            raise UsageError("--container-test and --no-container-test contradict each other",
                             fix="give one of them (neither: test when docker is installed and GPUs exist)")
        run_test = True if container_test else False if no_container_test else None
        code = run(inventory or [], target, VerifyOptions(expect, run_test), json, junit, accept_new_host_keys)
    if code:
        raise Exit(code=code)


@gtask(iterable=["file"], help={
    "file": "a saved output (nvidia-smi -q -x / -q / table / csv, lspci -nn, dmesg, error text), a folder or a "
            "`gpunode collect` bundle; repeatable, or give files as positional arguments", "json": "print JSON",
    "expect_gpus": "expected GPU count", "expect_model": "expected model",
})
def diagnose(c, file=None, json=False, expect_gpus=None, expect_model=None):
    """Analyse saved outputs offline (`gpunode diagnose FILE...` or --file): exit 0 healthy, 1 unhealthy, 2 unknown."""
    from gpunode.commands.verify_cmd import diagnose as run
    from gpunode.verify import Expectations

    with cli_errors():
        code = run(file or [], json, Expectations(_whole("--expect-gpus", expect_gpus), expect_model))
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
