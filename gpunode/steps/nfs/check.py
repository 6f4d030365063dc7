"""check_mounts: compare a host's facts with the NFS mounts its inventory expects (for verify reports)."""

from __future__ import annotations

from typing import Any

from gpunode.facts import Facts
from gpunode.steps.kinds import build_step
from gpunode.steps.nfs.fstab import find
from gpunode.steps.nfs.mount import NfsMountStep
from gpunode.steps.nfs.options import live_differences


def check_mounts(facts: Facts, expected: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One result per expected mount (nfs_mount arguments: server, export, path, vendor, nfs_version, options...).

    Each result: path, source, status ("ok" | "missing" | "wrong-source" | "wrong-options" | "invalid"),
    message, live_source, live_options, differences, in_fstab, managed. Needs no remote command: it reads
    facts.storage (mounts from /proc/self/mounts and the fstab text).
    """
    return [_check_one(facts, spec) for spec in expected]


def _check_one(facts: Facts, spec: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = {"path": str(spec.get("path", "")), "source": "", "status": "invalid", "message": "",
                              "live_source": None, "live_options": None, "differences": [],
                              "in_fstab": False, "managed": False}
    try:
        step = build_step("nfs_mount", dict(spec))
    except ValueError as exc:
        result["message"] = f"bad expected mount {spec!r}: {exc}"
        return result
    assert isinstance(step, NfsMountStep)  # the registry's class for kind nfs_mount
    result["path"], result["source"] = step.path, step.source
    found = find(facts.storage.fstab_text or "", step.path)
    result["in_fstab"], result["managed"] = bool(found.entries), found.managed is not None
    mount = facts.storage.mount_at(step.path)
    if mount is None:
        hint = " (its fstab line is there: `mount` it)" if found.entries else " and has no fstab line"
        if step.automount:
            hint += "; with automount it mounts on first access"
        result.update(status="missing", message=f"{step.path} is not mounted{hint}")
        return result
    result.update(live_source=mount.source, live_options=mount.options)
    if not step.same_source(mount.source):
        result.update(status="wrong-source", message=f"{step.path} has {mount.source} mounted, not {step.source}")
        return result
    diffs = live_differences(step.mount_options, mount.options)
    if diffs:
        result.update(status="wrong-options", differences=diffs,
                      message=f"{step.path} is mounted with other options: {'; '.join(diffs)}")
        return result
    result.update(status="ok", message=f"{step.source} on {step.path}")
    return result
