"""`mount-nfs` (a one-step playbook built in memory, run like provision) and `nfs-volume` (PV + PVC YAML)."""

from __future__ import annotations

from typing import Any

from gpunode.app.hosts import load_hosts
from gpunode.app.run import run_and_report
from gpunode.commands.common import check_forks
from gpunode.errors import UsageError
from gpunode.playbook import Playbook, StepSpec
from gpunode.steps import build_step
from gpunode.steps.nfs.k8s import manifests_yaml, parse_labels, volume_manifests
from gpunode.steps.nfs.mount import NfsMountStep

SOURCE = "mount-nfs"


def nfs_args(server: str | None, export: str | None, path: str | None, vendor: str, nfs_version: str | None,
             options: str | None, task: str = SOURCE, **flags: Any) -> dict[str, Any]:
    """nfs_mount arguments from command-line options (only the ones given); `task` names the command in a refusal."""
    missing = [f"--{name}" for name, value in (("server", server), ("export", export), ("path", path)) if not value]
    if missing:
        example = ("gpunode nfs-volume --server nas.example --export /data --name datasets" if task == "nfs-volume"
                   else "gpunode mount-nfs HOST --server nas.example --export /data --path /mnt/data")
        raise UsageError(f"{task} needs {', '.join(missing)}", fix=f"e.g. {example}")
    args: dict[str, Any] = {"server": server, "export": export, "path": path, "vendor": vendor}
    if nfs_version:
        args["nfs_version"] = nfs_version
    if options:
        args["options"] = options
    args.update({k: v for k, v in flags.items() if v is not None})
    return args


def validated(args: dict[str, Any], source: str) -> NfsMountStep:
    """Build the step now so that a bad option is a usage error (exit 2) before any host is touched."""
    try:
        step = build_step("nfs_mount", args)
    except ValueError as exc:
        raise UsageError(str(exc), source=source, fix=f"see `gpunode {source} --help`") from None
    assert isinstance(step, NfsMountStep)
    return step


def mount_playbook(args: dict[str, Any]) -> Playbook:
    """A one-step playbook around nfs_mount, as if read from a file."""
    step = validated(args, SOURCE)
    verb = "unmount" if step.state == "absent" else "mount"
    spec = StepSpec(kind="nfs_mount", args=args, name=f"{verb} {step.source} on {step.path}", when=None,
                    notify=[], source=SOURCE, line=1)
    return Playbook(path=SOURCE, name=SOURCE, hosts=None, vars={}, steps=[spec])


def mount_nfs(inventory: list[str], hosts: str | None, limit: str | None, args: dict[str, Any], check: bool,
              forks: int, json_report: str | None, junit: str | None, accept_new_host_keys: bool, verbose: bool,
              log_dir: str | None = None) -> int:
    """Run nfs_mount on the selected hosts with provision's reporting; returns the exit code."""
    forks = check_forks(forks)
    book = mount_playbook(args)
    _, selected = load_hosts(inventory, hosts, limit)
    return run_and_report(book, selected, check, forks, {}, json_report, junit, accept_new_host_keys, verbose,
                          log_dir)


def nfs_volume(args: dict[str, Any], name: str, size: str, namespace: str, labels: list[str] | None = None,
               driver: str = "nfs") -> str:
    """PV + PVC YAML for the share."""
    step = validated(args, "nfs-volume")
    try:
        return manifests_yaml(volume_manifests(step, name, size, namespace, parse_labels(labels or []), driver))
    except ValueError as exc:
        raise UsageError(str(exc), source="nfs-volume",
                         fix="e.g. --name datasets --size 100Gi --namespace default --driver csi "
                             "(`gpunode nfs-volume --help` lists the options)") from None
