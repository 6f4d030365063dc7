"""A Kubernetes PersistentVolume + PersistentVolumeClaim pair for an NFS share, with the same mount options."""

from __future__ import annotations

import re
from typing import Any

import yaml

from gpunode.steps.nfs import NfsMountStep
from gpunode.steps.nfs_options import kernel_options, render

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?\Z")
_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?\Z")


def volume_manifests(step: NfsMountStep, name: str, size: str = "1Ti",
                     namespace: str = "default") -> list[dict[str, Any]]:
    """PV (ReadWriteMany, Retain, no storage class) pre-bound to a PVC of the same name, and that PVC."""
    if not _NAME.match(name):
        raise ValueError(f"name must be a DNS-1123 name (lowercase letters, digits, - and .), got {name!r}")
    if not _NAME.match(namespace):
        raise ValueError(f"namespace must be a DNS-1123 name, got {namespace!r}")
    if not _QUANTITY.match(size):
        raise ValueError(f"size must be a Kubernetes quantity like 100Gi or 1Ti, got {size!r}")
    options = [render([option]) for option in kernel_options(step.mount_options)]
    labels = {"app.kubernetes.io/managed-by": "gpunode"}
    volume = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "capacity": {"storage": size},
            "accessModes": ["ReadWriteMany"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "mountOptions": options,
            "nfs": {"server": step.server, "path": step.export, "readOnly": False},
            "claimRef": {"namespace": namespace, "name": name},
        },
    }
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "",
            "volumeName": name,
            "resources": {"requests": {"storage": size}},
        },
    }
    return [volume, claim]


def manifests_yaml(documents: list[dict[str, Any]]) -> str:
    """Multi-document YAML for `kubectl apply -f -`."""
    return yaml.safe_dump_all(documents, sort_keys=False, explicit_start=True)
