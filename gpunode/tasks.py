"""The tasks behind both `invoke` (tasks.py at the repo top) and the `gpunode` console script."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from invoke import Collection, Program, task
from invoke.exceptions import Exit, ParseError
from invoke.parser import Parser, ParserContext
from invoke.tasks import Task

from gpunode.cliflags import flag_words, whole_numbers
from gpunode.clihelp import HELP_FLAGS, help_argv
from gpunode.clouds import bases_help, builders_help
from gpunode.commands.common import cli_errors
from gpunode.distros import DEFAULT_BASE
from gpunode.errors import GpunodeError, UsageError

PINNED_STATES = Path(__file__).parent / "image" / "states"  # one YAML per base (gpunode/image/image_state.py)


class GTask(Task):
    """A task whose short flags are given explicitly (`-i` inventory, `-H` hosts) instead of guessed."""

    SHORT = {"inventory": "i", "hosts": "H", "limit": "l", "check": "C", "forks": "f", "verbose": "v",
             "extra_vars": "e", "ask_become_pass": "K"}

    def arg_opts(self, name, default, taken_names):  # type: ignore[override]
        opts = super().arg_opts(name, default, taken_names)
        opts["names"] = [opts["names"][0]] + ([self.SHORT[name]] if name in self.SHORT else [])
        if name in self.FLAGS:  # a flag with a third state, "not given" (None): e.g. --container-test
            opts.update(kind=bool, default=None)
        return opts

    FLAGS = {"container_test", "no_container_test"}

    def get_arguments(self, ignore_unknown_help=None):  # type: ignore[no-untyped-def]
        """Invoke pops each help text as it makes the arguments: keep them for the next call (`missing_values()`,
        then the parser, then `--help` all ask), or the help printed options without their descriptions."""
        kept = dict(self.help)
        try:
            return super().get_arguments(ignore_unknown_help)
        finally:
            self.help = kept

    def __call__(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        """`invoke verify-gpu --help`: Invoke takes `--help` for the missing host; print the task's help instead."""
        if any(kwargs.get(name) in HELP_FLAGS for name in self.positional):
            from gpunode.clihelp import binary_name, print_task_help

            print_task_help(ns, self, binary_name())
            return None
        return super().__call__(*args, **kwargs)


def gtask(*args, **kwargs):
    return task(*args, klass=GTask, auto_shortflags=False, **kwargs)


CONN_HELP = {
    "inventory": "inventory file or folder (YAML or INI, Ansible-compatible); repeatable",
    "hosts": "ad-hoc hosts: host1,user@host2:2222",
    "limit": "limit to a pattern: group, host, glob, !exclude, &intersect",
}
KEYS_HELP = {"accept_new_host_keys": "trust unknown host keys on first use (recorded in gpunode's known_hosts)"}


EXTRA_VARS_HELP = ("Ansible's extra vars: KEY=VALUE (several in one quoted argument), @FILE (YAML or JSON) or a "
                   "JSON/YAML mapping; repeatable, wins over --var")
PLAYBOOK_HELP = ("a built-in playbook by name (base, gpu-node, nfs: `gpunode playbooks`) or your own file as a path "
                 "(site.yml, ./base.yml)")


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
    from gpunode.commands.provision import provision as run

    with cli_errors():
        code = run(inventory or [], hosts, playbook, limit, check, forks, var or [], json_report, junit,
                   accept_new_host_keys, verbose, log_dir, tags, skip_tags, extra_vars or [], diff, ask_become_pass,
                   max_diff_size)
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


def _whole(option: str, value: object) -> int | None:
    """An optional whole-number option (None when not given); anything else is a usage error."""
    if value is None or value == "":
        return None
    text = str(value).strip()
    if not text.isdigit():
        example = {"--driver-branch": 550, "--port": 22}.get(option, 8)
        raise UsageError(f"must be a whole number (0 or more), got {value!r}", source=option,
                         fix=f"e.g. {option} {example}")
    return int(text)


def _amount(option: str, value: object, default: float) -> float:
    """An optional non-negative number option."""
    if value is None or value == "":
        return default
    try:
        number = float(str(value))
    except ValueError:
        number = -1.0
    if not 0 <= number < 1e9:
        raise UsageError(f"must be a number of 0 or more, got {value!r}", source=option, fix=f"e.g. {option} 2")
    return number


def _positive(option: str, value: object, most: int = 200) -> int:
    text = str(value).strip()
    if not text.isdigit() or not 1 <= int(text) <= most:
        raise UsageError(f"must be a whole number from 1 to {most}, got {value!r}", source=option,
                         fix=f"e.g. {option} 3")
    return int(text)


@gtask(help={"mirror": "Debian mirror URL (default: this machine's)"})
def lab_base_image(c, mirror=None):
    """Build (once, cached) a local Debian 12 cloud image for `build-image --builder qemu`; print its path."""
    from gpunode.lab.cloud_image import ensure_cloud_image

    print(ensure_cloud_image(mirror))


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


@gtask(iterable=["label"], help={**{k: v for k, v in NFS_HELP.items() if k != "path"},
             "name": "name of the PersistentVolume and its claim", "size": "capacity (default 1Ti)",
             "namespace": "namespace of the claim (default default)",
             "label": "KEY=VALUE label on the PV that the claim selects (selector.matchLabels); repeatable",
             "driver": "nfs (the in-tree NFS source, default) or csi (the vendor's CSI driver: Alibaba NAS, AWS EFS, "
                       "Tencent CFS)"})
def nfs_volume(c, server=None, export=None, name=None, vendor="generic", nfs_version=None, options=None,
               size="1Ti", namespace="default", label=None, driver="nfs"):
    """Print a Kubernetes PersistentVolume + PersistentVolumeClaim (ReadWriteMany) for an NFS share."""
    from gpunode.commands.nfs_cmd import nfs_args
    from gpunode.commands.nfs_cmd import nfs_volume as make

    with cli_errors():
        args = nfs_args(server, export, f"/mnt/{name or 'nfs'}", vendor, nfs_version, options, task="nfs-volume")
        if not name:
            from gpunode.errors import UsageError

            raise UsageError("nfs-volume needs --name", fix="e.g. --name datasets")
        print(make(args, name, size, namespace, label or [], driver), end="")



@gtask(iterable=["env"], help={
    "cloud": "eci (Alibaba Cloud ECI: ACK Serverless / virtual nodes) or tke-eks (Tencent EKS / TKE super nodes)",
    "image": "the training image", "command": "the training command (run as sh -c COMMAND)",
    "gpus": "GPUs for the container (its nvidia.com/gpu limit; default 1)",
    "gpu_type": "eci: ECS GPU instance types for eci-use-specs, in priority order (e.g. ecs.gn6i-c4g1.xlarge); "
                "tke-eks: GPU models for the gpu-type annotation (V100, T4, 1/2*T4, 1/4*T4; e.g. T4,V100)",
    "pvc": "the claim to mount (the --name given to `gpunode nfs-volume`)",
    "mount_path": "where the claim is mounted in the container", "name": "the Pod or Job name (default train)",
    "namespace": "namespace (the claim's; default default)", "kind": "pod (default) or job (batch/v1)",
    "env": "NAME=VALUE for the container's environment; repeatable",
    "cpu": "tke-eks: the pod's cores (cpu annotation; with --memory, and gpu-count is then written too)",
    "memory": "tke-eks: the pod's memory in Gi, e.g. 32Gi (mem annotation; with --cpu)",
})
def gpu_pod(c, cloud=None, image=None, command=None, gpus="1", gpu_type=None, pvc=None, mount_path=None,
            name="train", namespace="default", kind="pod", env=None, cpu=None, memory=None):
    """Print the training Pod or Job for a serverless GPU cloud (Alibaba ECI, Tencent EKS), mounting a claim.

    The cloud's GPU annotations and the nvidia.com/gpu limit are written as the vendors document them (sources in
    gpunode/gpupod/facts.py); combinations their guides forbid are refused (exit 2) with the rule and its page.
    """
    from gpunode.commands.gpu_pod_cmd import gpu_pod_yaml, parse_env
    from gpunode.gpupod.manifest import GpuPod

    with cli_errors():
        missing = [f"--{flag}" for flag, value in (("cloud", cloud), ("image", image), ("command", command),
                                                   ("gpu-type", gpu_type), ("pvc", pvc), ("mount-path", mount_path))
                   if not value]
        if missing:
            example = ("--cloud eci --gpu-type ecs.gn6i-c4g1.xlarge" if cloud == "eci" else
                       "--cloud tke-eks --gpu-type T4")  # the example of the cloud asked for
            raise UsageError(f"gpu-pod needs {', '.join(missing)}",
                             fix=f"e.g. gpunode gpu-pod {example} --image IMAGE --command 'python3 train.py' "
                                 "--pvc datasets --mount-path /data")
        pod = GpuPod(cloud, image, command, _whole("--gpus", gpus) or 0, gpu_type, pvc, mount_path, name, namespace,
                     kind, parse_env(env or []), cpu, memory)
        print(gpu_pod_yaml(pod), end="")


@gtask(iterable=["node_selector"], help={
    "name": "RuntimeClass name (default nvidia): pods select it with runtimeClassName",
    "handler": "containerd runtime handler (default nvidia: the runtime container_runtime adds)",
    "node_selector": "KEY=VALUE label of the GPU nodes, so such pods land only there; repeatable",
})
def runtime_class(c, name="nvidia", handler="nvidia", node_selector=None):
    """Print a Kubernetes RuntimeClass for the nvidia runtime (clusters where it is not the default)."""
    from gpunode.commands.common import option_pairs
    from gpunode.kube import runtime_class as make
    from gpunode.steps.nfs.k8s import manifests_yaml

    with cli_errors():
        selector = option_pairs(node_selector, "--node-selector", "KEY=VALUE", "gpu=true")
        try:
            print(manifests_yaml([make(name, handler, selector)]), end="")
        except ValueError as exc:
            raise UsageError(str(exc), fix="see gpunode --help runtime-class") from None


@gtask(positional=["what"], iterable=["env"], help={
    "what": "device-plugin (NVIDIA's device plugin DaemonSet, pinned release) or tfjob (a Kubeflow TFJob)",
    "name": "tfjob: the TFJob's name", "image": "tfjob: the training image (Chief and Workers)",
    "ps_image": "tfjob: the parameter servers' image (default --image)",
    "command": "tfjob: the command, e.g. 'python /app/main.py'", "claim": "tfjob: the PersistentVolumeClaim to "
    "mount (the --name given to gpunode nfs-volume)", "mount_path": "tfjob: where it is mounted (default /training)",
    "workers": "tfjob: Worker replicas (default 1)", "ps": "tfjob: parameter servers (default 1; 0: none)",
    "gpus": "tfjob: GPUs per Chief/Worker (default 1)", "no_chief": "tfjob: no Chief replica (Worker 0 leads)",
    "namespace": "tfjob: its namespace (default default)", "env": "tfjob: NAME=VALUE in every replica; repeatable",
})
def k8s_manifest(c, what, name=None, image=None, ps_image=None, command=None, claim=None, mount_path="/training",
                 workers=1, ps=1, gpus=1, no_chief=False, namespace="default", env=None):
    """Print Kubernetes objects for self-managed GPU node pools: NVIDIA's device plugin, or a TFJob on a PVC."""
    from gpunode.commands import kube_cmd
    from gpunode.errors import UsageError
    from gpunode.steps.nfs.k8s import manifests_yaml

    with cli_errors():
        if what == "device-plugin":
            objects = kube_cmd.device_plugin()
        elif what == "tfjob":
            objects = kube_cmd.tfjob(name or "", image or "", claim or "", ps_image=ps_image or "",
                                     command=command or "", mount_path=mount_path, chief=not no_chief,
                                     workers=int(workers), ps=int(ps), gpus=int(gpus), namespace=namespace, env=env)
        else:
            raise UsageError(f"k8s-manifest {what!r}: no such manifest", fix="device-plugin or tfjob")
        print(manifests_yaml(objects), end="")


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


@gtask(help={"show": "print one step kind's doc and arguments (type, default, what it is)"})
def steps(c, show=None):
    """List the step kinds a playbook can use, or print one kind's reference (as docs/steps.md has it)."""
    from gpunode.steps.reference import step_section, steps_index
    from gpunode.steps.registry import declared

    with cli_errors():
        if not show:
            print(steps_index(), end="")
            return
        if show not in declared():
            raise UsageError(f"no step kind {show!r}",
                             fix="`gpunode steps` lists them: " + ", ".join(sorted(declared())))
        print("\n".join(step_section(show)))


@gtask(help={"json": "print JSON", "show": "print one built-in playbook's YAML (to read it or start your own)"})
def playbooks(c, json=False, show=None):
    """List the built-in playbooks with their tags, variables and defaults (read from the playbooks themselves)."""
    from gpunode.commands.playbooks_cmd import list_playbooks

    with cli_errors():
        print(list_playbooks(json, show), end="")


@gtask(iterable=["var"], help={
    "image": "the base image whose pinned state is planned from (gpunode/image/states/: "
             + ", ".join(sorted(p.stem for p in PINNED_STATES.glob("*.yaml"))) + ")",
    "playbook": f"{PLAYBOOK_HELP}; default base", "json": "print JSON",
    "var": "extra variable KEY=VALUE; repeatable",
})
def plan(c, image=None, playbook="base", json=False, var=None):
    """What a bake would do to a base image: the playbook planned on the image's pinned state, offline."""
    from gpunode.commands.plan_cmd import plan_text

    with cli_errors():
        print(plan_text(image, playbook, json, var or []), end="")


@gtask(positional=["directory"], help={
    "directory": "the project folder to create (it may exist, but none of the files gpunode writes may)",
    "force": "overwrite files that exist",
})
def init(c, directory, force=False):
    """Start a project of your own: an inventory (hosts, group_vars, host_vars), site.yml, README, tasks.py."""
    from gpunode.commands.init_cmd import init_project

    with cli_errors():
        print(init_project(directory, force), end="")



@gtask(positional=["action"], help={
    "action": "list (every entry with its key, size, builder and whether it is intact) or prune",
    "dir": "the cache folder (default $XDG_CACHE_HOME/gpunode/modules, what provision uses), or the https URL of a "
           "module_cache (its entries read so far, kept on this controller)",
    "kernel": "only entries for this kernel release", "older_than": "prune: entries older than this many days",
    "invalid": "prune: entries whose package or vermagic fails the check", "json": "print JSON",
})
def cache(c, action, dir=None, kernel=None, older_than=None, invalid=False, json=False):  # noqa: A002
    """The module cache: DKMS modules built once per kernel and installed on the other hosts (`module_cache`)."""
    from gpunode.commands.cache_cmd import cache_command

    with cli_errors():
        days = _amount("--older-than", older_than, 0.0) if older_than is not None else None
        print(cache_command(action, dir, kernel, days, invalid, json), end="")


ns = Collection(provision, facts, inventory_, lab_up, lab_down, verify_gpu, diagnose, collect, playbooks, steps, init,
                plan)
ns.add_task(mount_nfs)
ns.add_task(nfs_volume)
ns.add_task(runtime_class)
ns.add_task(gpu_pod)
ns.add_task(k8s_manifest)
ns.add_task(lab_base_image)
ns.add_task(cache)


IMAGE_HELP = {
    "playbook": f"playbook run on the build instance: {PLAYBOOK_HELP}; default gpu-node (base on --base "
                "al2023-ecs-gpu, whose NVIDIA driver is AWS's)",
    "var": "playbook variable KEY=VALUE; repeatable", "extra_vars": EXTRA_VARS_HELP,
    "driver_branch": "NVIDIA driver branch, e.g. 580",
    "base": bases_help(),
    "region": "cloud region (AWS default: AWS_REGION or us-east-1)", "instance_type": "build instance type",
    "name": "image name (default gpunode-<playbook>-<base>-<build id>)",
    "validate_only": "check the playbook, the variables and the template (packer validate, no credentials); build "
                     "nothing, keep nothing. Offline with Packer 1.6 (builders built in); Packer 1.7+ runs `packer "
                     "init` first, which downloads the builder's plugin unless it is installed",
    "packer_var": "template variable KEY=VALUE (see packer/*.pkr.hcl), e.g. subnet_id=subnet-0abc; repeatable",
    "ssh_key": "an existing private key for the build instead of a new one (must be accepted by the base image)",
    "verify": "verify-gpu on the build instance: auto (when it has GPUs, default), always, never",
    "expect_gpus": "GPUs the build instance must show (verify-gpu)",
    "min_free_gb": "free space the image must keep on / (default 2)",
    "launch_template": "also write an EC2 launch-template JSON for the new AMI here",
    "batch": "also write an AWS Batch compute-environment JSON for the new AMI here",
}
JOB_HELP = {
    "batch_job_definition": "also write an AWS Batch job definition JSON (a container job asking for GPUs) here",
    "job_image": "the job definition's container image (needed with --batch-job-definition)",
    "job_command": "the job's command, split like a shell would (default nvidia-smi)",
    "job_gpus": "GPUs the job asks for (default 1)", "job_vcpus": "vCPUs (default 4)",
    "job_memory": "memory in MiB (default 16384: more than a 16 GiB instance registers, so on the default "
                  "g5.xlarge give less, e.g. 14336, or a larger --instance-type; Batch's memory-management page)",
    "user_data": "embed this user data (from `gpunode user-data --bundle-url`; for --batch: `--format mime`) in the "
                 "--launch-template output",
}
BATCH_HELP = {
    "batch_job_queue": "also write an AWS Batch job queue JSON (sending jobs to the --batch compute environment) here",
    "batch_job": "also write an AWS Batch submit-job JSON (the job definition on the queue) here",
    "subnet": "a VPC subnet id of the compute environment (needed with --batch); repeatable",
    "security_group": "a security group id of the compute environment (needed with --batch); repeatable",
    "instance_role": "the ECS instance profile (name or ARN) of the compute environment (needed with --batch)",
    "service_role": "the Batch service role ARN (default: Batch's service-linked role)",
}


def _batch_options(request, batch_job_queue, batch_job, subnet, security_group, instance_role, service_role,
                   user_data):
    """The Batch options on a build or bake request (checked before anything starts)."""
    from gpunode.image.outputs import read_user_data

    request.batch_job_queue, request.batch_job = batch_job_queue, batch_job
    request.subnets, request.security_groups = list(subnet or []), list(security_group or [])
    request.instance_role, request.service_role = instance_role, service_role
    request.user_data = read_user_data(user_data)
    return request


def _all_vars(var: list[str] | None, extra_vars: list[str] | None) -> list[str]:
    """--var pairs, then -e's (K=V, @file, JSON/YAML) as pairs that read back to the same values."""
    if not extra_vars:
        return list(var or [])
    from gpunode.app.variables import as_var_pairs, parse_extra_vars

    return [*(var or []), *as_var_pairs(parse_extra_vars(extra_vars))]


def _build_request(builder, playbook, var, base, region, instance_type, driver_branch, name, source_image,
                   packer_var, ssh_key, endpoint, verify, expect_gpus, min_free_gb, validate_only, launch_template,
                   batch):
    from gpunode.image.build import BuildRequest

    return BuildRequest(builder=builder, playbook=playbook, variables=var or [], base=base, region=region,
                        instance_type=instance_type, driver_branch=_whole("--driver-branch", driver_branch),
                        name=name, source_image=source_image, packer_vars=packer_var or [], ssh_key=ssh_key,
                        endpoint=endpoint, verify=verify, expect_gpus=_whole("--expect-gpus", expect_gpus),
                        min_free_gb=_amount("--min-free-gb", min_free_gb, 2.0), validate_only=validate_only,
                        launch_template=launch_template, batch=batch)


@gtask(iterable=["var", "packer_var", "extra_vars", "subnet", "security_group"], help={
    **IMAGE_HELP, **JOB_HELP, **BATCH_HELP, "source_ami": "an exact base AMI id (default: the newest AMI of --base)",
    "endpoint": "another EC2 endpoint URL (e.g. a local moto_server)",
})
def build_ami(c, region=None, instance_type="g5.xlarge", base=DEFAULT_BASE, driver_branch=None,
              playbook="", var=None, validate_only=False, name=None, source_ami=None,
              packer_var=None, ssh_key=None, endpoint=None, verify="auto", expect_gpus=None, min_free_gb=None,
              launch_template=None, batch=None, batch_job_definition=None, job_image=None, job_command=None,
              job_gpus=None, job_vcpus=None, job_memory=None, user_data=None, extra_vars=None, batch_job_queue=None,
              batch_job=None, subnet=None, security_group=None, instance_role=None, service_role=None):
    """Bake an AWS AMI with Packer: gpunode provisions the build instance, cleans and validates it, then tags it."""
    from gpunode.commands.image_cmd import build
    from gpunode.image.outputs import JobSpec

    with cli_errors():
        request = _build_request("aws", playbook, _all_vars(var, extra_vars), base, region, instance_type,
                                 driver_branch, name, source_ami, packer_var, ssh_key, endpoint, verify,
                                 expect_gpus, min_free_gb, validate_only, launch_template, batch)
        if batch_job_definition:
            request.batch_job_definition = batch_job_definition
            request.job = JobSpec.parse(job_image, job_command, job_gpus, job_vcpus, job_memory)
        code = build(_batch_options(request, batch_job_queue, batch_job, subnet, security_group, instance_role,
                                    service_role, user_data))
    if code:
        raise Exit(code=code)


@gtask(iterable=["var", "packer_var", "extra_vars"], help={
    **{k: v for k, v in IMAGE_HELP.items() if k not in ("launch_template", "batch")},
    "builder": builders_help("qemu"),
    "source_image": "the base image: a qcow2 path/URL (qemu) or the cloud's image id (the bases a cloud finds by "
                    "name need none: docs/clouds.md)",
})
def build_image(c, builder="qemu", region=None, instance_type=None, base=DEFAULT_BASE, driver_branch=None,
                playbook="", var=None, validate_only=False, name=None, source_image=None,
                packer_var=None, ssh_key=None, verify="auto", expect_gpus=None, min_free_gb=None, extra_vars=None):
    """Bake a node image with Packer on a builder other than AWS (--builder; docs/clouds.md)."""
    from gpunode.commands.image_cmd import build

    with cli_errors():
        code = build(_build_request(builder, playbook, _all_vars(var, extra_vars), base, region, instance_type,
                                    driver_branch, name, source_image, packer_var, ssh_key, None, verify,
                                    expect_gpus, min_free_gb, validate_only, None, None))
    if code:
        raise Exit(code=code)


@gtask(positional=["target"], iterable=["inventory", "subnet", "security_group"], help={
    "target": "the host: a pattern of the inventory given with -i, else user@host[:port]",
    "inventory": CONN_HELP["inventory"], **KEYS_HELP, "name": "image name (required)",
    "region": "AWS region (default AWS_REGION or us-east-1)", "endpoint": "another EC2 endpoint URL (moto_server)",
    "playbook": "the playbook the host was provisioned with (its sha256 is tagged)",
    "keep_key": "keep the connecting key in authorized_keys (it is removed by default)",
    "verify": IMAGE_HELP["verify"], "min_free_gb": IMAGE_HELP["min_free_gb"],
    "launch_template": IMAGE_HELP["launch_template"], "batch": IMAGE_HELP["batch"], **JOB_HELP, **BATCH_HELP,
})
def bake(c, target, name=None, inventory=None, region=None, endpoint=None, playbook=None, keep_key=False,
         verify="auto", min_free_gb=None, accept_new_host_keys=False, launch_template=None, batch=None,
         batch_job_queue=None, batch_job_definition=None, batch_job=None, job_image=None, job_command=None,
         job_gpus=None, job_vcpus=None, job_memory=None, user_data=None, subnet=None, security_group=None,
         instance_role=None, service_role=None):
    """Image an already provisioned EC2 instance: cleanup + validation, stop, create the AMI, wait, tag."""
    import os

    from gpunode.commands.image_cmd import bake_host
    from gpunode.errors import UsageError
    from gpunode.image.bake import BakeRequest

    with cli_errors():
        if not name:
            raise UsageError("bake needs --name", fix="e.g. --name gpu-node-2024-06")
        region = region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
        request = BakeRequest(target, name, inventory or [], region, endpoint, playbook, keep_key, verify,
                              _amount("--min-free-gb", min_free_gb, 2.0), accept_new_host_keys, launch_template,
                              batch, batch_job_definition=batch_job_definition)
        if batch_job_definition:
            from gpunode.image.outputs import JobSpec

            request.job = JobSpec.parse(job_image, job_command, job_gpus, job_vcpus, job_memory)
        code = bake_host(_batch_options(request, batch_job_queue, batch_job, subnet, security_group, instance_role,
                                        service_role, user_data))
    if code:
        raise Exit(code=code)


@gtask(help={"spec": "the build spec (<build_dir>/build.json; required)",
             "host": "build instance address (build.Host; required)",
             "port": "SSH port (build.Port)", "user": "SSH user (build.User)"})
def image_provision(c, spec=None, host=None, port=22, user="root"):
    """Run by Packer's shell-local provisioner: playbook, verify-gpu, image cleanup and validation; JSON report."""
    from gpunode.commands.image_cmd import image_provision as run

    with cli_errors():
        if not spec or not host:
            raise UsageError("image-provision needs --spec and --host", fix="it is run by Packer for `gpunode "
                             "build-ami`/`build-image`: --spec BUILD_DIR/build.json --host ADDRESS")
        code = run(spec, host, _whole("--port", port) or 22, user)
    if code:
        raise Exit(code=code)


ns.add_task(build_ami)
ns.add_task(build_image)
ns.add_task(bake)
ns.add_task(image_provision)


@gtask(iterable=["var", "extra_vars"], help={
    "playbook": f"the playbook the new node runs on itself at first boot: {PLAYBOOK_HELP}; default base",
    "var": "playbook variable KEY=VALUE; repeatable", "extra_vars": EXTRA_VARS_HELP,
    "format": "shell (a bash script, default), cloud-init, or mime (the script in a MIME multi-part archive: what an "
              "AWS Batch launch template needs)",
    "output": "write the user data here (default: print it)",
    "module_cache": "the module cache: a folder on the node (a mounted share: the node installs its DKMS module from "
                    "it when its group is there, else builds it and adds it) or an https URL (a bucket: read-only, the "
                    "node builds when its group is missing) (sets module_cache)",
    "bundle_url": "fetch the gpunode bundle from this http(s) URL at boot instead of embedding it (needed for EC2, "
                  "ACK, TKE: their user data is limited to 16-32 KB)",
    "bundle_out": "with --bundle-url: write the bundle here, to upload to that URL",
})
def user_data(c, playbook="base", var=None, format="shell", output=None, bundle_url=None,  # noqa: A002
              bundle_out=None, extra_vars=None, module_cache=None):
    """User data that provisions a new node at first boot: the playbook on the node itself, verify-gpu, a marker."""
    import json
    from pathlib import Path

    from gpunode.image.userdata import CLOUD_LIMIT
    from gpunode.image.userdata import user_data as make
    from gpunode.modcache.url_source import url_problem

    with cli_errors():
        variables = _all_vars(var, extra_vars)
        if module_cache is not None:
            where = str(module_cache).strip()
            fix = ("give the bucket's https URL, or mount the share at first boot (e.g. with the nfs playbook or "
                   "fstab) and give its absolute path: --module-cache /mnt/share/modules")
            if "://" in where and (problem := url_problem(where)):
                raise UsageError(problem, source="--module-cache", fix=fix)
            if "://" not in where and not where.startswith("/"):
                raise UsageError(f"{where!r} is neither an https URL nor an absolute path on the node (the first "
                                 "boot's working directory is nobody's choice)", source="--module-cache", fix=fix)
            if any(v.partition("=")[0].strip() == "module_cache" for v in variables):
                raise UsageError("module_cache is given twice: by --module-cache and by --var/-e",
                                 source="--module-cache", fix="give it once")
            variables = [*variables, f"module_cache={json.dumps(where)}"]
        text, bundle = make(playbook, variables, format, bundle_url, bundle_out)
        if output:
            Path(output).write_text(text)
            print(f"user data written to {output} ({len(text)} bytes, bundle {len(bundle)} bytes)", file=sys.stderr)
        else:
            sys.stdout.write(text)
        if len(text) > CLOUD_LIMIT:
            print(f"note: {len(text)} bytes of user data: EC2 and Tencent CVM take at most 16 KB, Alibaba ECS 32 KB; "
                  "for them use --bundle-url URL --bundle-out FILE (embedded fits NoCloud seeds and images)",
                  file=sys.stderr)


ns.add_task(user_data)


@gtask(help={"hosts": "host counts, comma-separated (default 1,8,32)",
             "repeat": "converged re-runs per tool, median reported (default 3)",
             "tools": "default floor,gpunode,ansible,pyinfra",
             "tools_at": "other tools at a host count, N=TOOLS[;N=TOOLS] (default 32=floor,gpunode,pyinfra: "
                         "ansible at 32 hosts takes too long)",
             "output": "results folder (default bench/results)",
             "no_micro": "skip the facts and verify-gpu parse timings"})
def bench(c, hosts="1,8,32", repeat=3, tools="floor,gpunode,ansible,pyinfra", tools_at="32=floor,gpunode,pyinfra",
          output=None, no_micro=False):
    """Benchmark gpunode against ansible-playbook, pyinfra and the SSH floor on fresh lab hosts (root; a checkout)."""
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    if not (repo / "bench" / "run.py").is_file():
        raise Exit("bench/ is part of the source checkout, not of an installed gpunode", code=2)
    sys.path.insert(0, str(repo))
    from bench.run import main as run_bench

    argv = ["--hosts", str(hosts), "--repeat", str(repeat), "--tools", tools, "--tools-at", tools_at or ""]
    argv += ["--no-micro"] if no_micro else []
    code = run_bench(argv + (["--output", output] if output else []))
    if code:
        raise Exit(code=code)


ns.add_task(bench)


def main() -> None:
    """Entry point of the `gpunode` console script: the same tasks as `invoke`."""
    from gpunode import __version__

    try:
        argv = help_argv(sys.argv, ns)
        if len(argv) > 2 and argv[1] in ns.task_names:
            argv = argv[:2] + whole_numbers(flag_words(argv[2:], ns[argv[1]]), ns[argv[1]])
        missing_values(argv)
        _Program(namespace=ns, version=__version__, name="gpunode", binary="gpunode").run(diagnose_argv(argv))
        sys.stdout.flush()
    except UsageError as exc:  # found in the command line itself, before Invoke parses it
        print(f"error: {exc.cause}\n  fix: {exc.fix}", file=sys.stderr)
        sys.exit(2)
    except BrokenPipeError:  # `gpunode inventory | head`: the reader has gone; stop quietly like other tools
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python flushes
        sys.exit(141)  # 128 + SIGPIPE, what a shell reports for a command killed by a closed pipe
    except Exception as exc:  # noqa: BLE001 - a bug must still end with a message and an exit code, not a traceback
        print(f"error: internal error: {type(exc).__name__}: {exc}\n  fix: please report this (with the command "
              "line); run with GPUNODE_TRACEBACK=1 for the traceback", file=sys.stderr)
        if os.environ.get("GPUNODE_TRACEBACK") == "1":
            raise
        sys.exit(1)


def console_main() -> None:
    """The console script (`gpunode`, `python -m gpunode`): `main()`, then, after a `provision`, exit without the
    interpreter's teardown (every module and object freed one by one: tens of ms after a run). Everything the run
    wrote (reports, logs, the facts cache) is closed by then, and its threads have ended."""
    code: int | str | None = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code
    if len(sys.argv) < 2 or sys.argv[1] != "provision" or not isinstance(code, int | None):
        sys.exit(code)
    import logging

    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code or 0)


def missing_values(argv: list[str]) -> None:
    """Refuse an option that takes a value but was given none (`provision --var`, `--tags` last on the line): Invoke
    would drop it silently, and a run meant to be narrowed (--tags, --check-like --var) would run everything."""
    if len(argv) < 2 or argv[1] not in ns.task_names:
        return
    takes_value, flags = {}, {"-h", "--help"}
    for argument in ns[argv[1]].get_arguments():
        for name in argument.names:
            flag = f"--{name.replace('_', '-')}" if len(name) > 1 else f"-{name}"
            flags.add(flag)
            if argument.kind is not bool:
                takes_value[flag] = f"--{argument.names[0].replace('_', '-')}"
    for index, token in enumerate(argv[2:], start=2):
        if token in takes_value:
            following = argv[index + 1] if index + 1 < len(argv) else None
            if following is None or following.partition("=")[0] in flags:  # "-1" or "-gpu=x" are values
                print(f"error: {takes_value[token]} needs a value\n  fix: e.g. {takes_value[token]} VALUE; see "
                      f"`gpunode --help {argv[1]}`", file=sys.stderr)
                sys.exit(2)


def diagnose_argv(argv: list[str]) -> list[str]:
    """`gpunode diagnose A B --json` -> `gpunode diagnose --file A --file B --json` (invoke has no variadic
    positional arguments); other commands are passed through unchanged."""
    if len(argv) < 2 or argv[1] != "diagnose":
        return argv
    out, expects_value = argv[:2], False
    for arg in argv[2:]:
        if expects_value or arg.startswith("-"):
            out.append(arg)
            expects_value = arg in ("-f", "--file", "--expect-gpus", "--expect-model", "-e")
        else:
            out += ["--file", arg]
    return out


class _Program(Program):
    """Invoke's program, with bad options (unknown flags, `--forks=abc`) as usage errors: exit 2, no traceback."""

    def parse_core(self, argv) -> None:  # type: ignore[no-untyped-def]
        with _usage():
            super().parse_core(argv)

    def parse_tasks(self) -> None:
        with _usage():
            super().parse_tasks()

    def update_config(self, merge: bool = True) -> None:
        with _usage():  # -f/--config FILE of the wrong type
            super().update_config(merge)

    def _make_parser(self) -> Parser:
        """A parser that knows only the task named first (gpunode runs one task per command line): Invoke deep-copies
        every task's parser context it is given, ~15 ms of start-up for all of gpunode's tasks."""
        name = self.core.unparsed[0] if self.core and self.core.unparsed else ""
        if name not in self.collection.task_names:
            return super()._make_parser()
        args = self.collection[name].get_arguments(ignore_unknown_help=self.config.tasks.ignore_unknown_help)
        context = ParserContext(name=name, aliases=self.collection.task_names[name], args=args)
        return Parser(initial=self.initial_context, contexts=[context])


@contextmanager
def _usage() -> Iterator[None]:
    from invoke.exceptions import UnknownFileType

    try:
        yield
    except UnknownFileType as exc:  # `-f x` on a task without --forks is Invoke's own -f/--config FILE
        raise Exit(message=f"error: -f/--config: {exc}\n  fix: this task has no -f/--forks; -f here is Invoke's "
                   "config file (.yaml, .yml, .json or .py)", code=2) from None
    except (ParseError, ValueError) as exc:
        raise Exit(message=f"error: {_option_problem(exc)}\n  fix: {_option_fix(exc)}", code=2) from None


def _option_fix(exc: Exception) -> str:
    """What to do: for a missing positional argument the task's own command line, else where the options are."""
    import re

    missing = re.search(r"'([\w-]+)' did not receive required positional arguments: (.*)", str(exc))
    if missing:
        task, names = missing.group(1), re.findall(r"'(\w+)'", missing.group(2))
        return (f"give it: `gpunode {task} {' '.join(n.upper() for n in names)} [options]` "
                f"(`gpunode {task} --help` says what it takes)")
    twice = _repeated_option(exc)
    if twice:
        return f"give {twice} once (it takes one value; repeatable options say so in `gpunode --help TASK`)"
    return "see `gpunode --help` and `gpunode --help TASK` for the options and their types"


def _repeated_option(exc: Exception) -> str | None:
    """Invoke's "No idea what 'X' is!" when X is the value of an option given a second time: that option."""
    import re
    import sys

    left = re.search(r"No idea what '(.*)' is!", str(exc))
    argv = sys.argv[1:]
    for i, word in enumerate(argv[1:], start=1):
        before = argv[i - 1]
        if left and word == left.group(1) and before.startswith("--") and "=" not in before and before in argv[:i - 1]:
            return before
    return None


def _option_problem(exc: Exception) -> str:
    """Invoke's parse error in words: `int()` of a bad number (`-f x`) becomes "'x' is not a whole number"."""
    import re

    number = re.search(r"invalid literal for int\(\) with base 10: ('.*')", str(exc))
    if number:
        return f"bad option value: {number.group(1)} is not a whole number (an option that takes a number)"
    twice = _repeated_option(exc)
    if twice:
        return f"{twice} is given twice: the second value is left over ({exc})"
    return f"bad option value: {exc}" if isinstance(exc, ValueError) else str(exc)
