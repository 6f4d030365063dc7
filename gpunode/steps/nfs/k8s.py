"""A Kubernetes PersistentVolume + PersistentVolumeClaim pair for an NFS share, with the same mount options.

The PV's source is the in-tree `nfs` volume (any cluster) or, with driver "csi", the cloud's own CSI driver for the
vendor's file storage. Labels go on the PV and the claim selects them (`selector.matchLabels`), as the clouds'
training guides bind claims to NAS volumes.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from gpunode.kube import DNS_LABEL, DNS_NAME, label_key_ok, label_value_ok
from gpunode.steps.nfs.mount import NfsMountStep
from gpunode.steps.nfs.options import kernel_options, render

_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?\Z")
_EFS_ID = re.compile(r"^(fs-[0-9a-f]{8,40})(\.|\Z)")

DRIVERS = ("nfs", "csi")
# The clouds' CSI drivers for their NFS file storage (static PVs):
#   Alibaba NAS: kubernetes-sigs/alibaba-cloud-csi-driver docs/nas.md and "Mount a statically provisioned NAS
#     volume" (https://help.aliyun.com/document_detail/151416.html): volumeHandle = the PV name, volumeAttributes
#     server (mount target) and path, NFS options in the PV's mountOptions.
#   AWS EFS: kubernetes-sigs/aws-efs-csi-driver README and examples/kubernetes/encryption_in_transit: volumeHandle =
#     the file system id (`fs-...`, `fs-...:/path` for a subdirectory), volumeAttributes encryptInTransit (TLS, the
#     driver's default); the driver's mount helper (efs-utils) chooses the NFS options itself.
#   Tencent CFS: TencentCloud/kubernetes-csi-tencentcloud docs/README_CFS.md, "PersistentVolume parameters":
#     host, path, vers (3 or 4), options (mount options); volumeHandle unique (the PV name). What the driver does
#     with them: CFS_NODE below.
CSI_DRIVERS = {"alibaba-nas": "nasplugin.csi.alibabacloud.com", "aws-efs": "efs.csi.aws.com",
               "tencent-cfs": "com.tencent.cloud.csi.cfs"}
# TencentCloud/kubernetes-csi-tencentcloud driver/cfs/node.go @ defc12d0aa1cd9033474235ef3a670263c8fada4:
# 64-78 read host/path/vers/options/fsid from volumeAttributes; 101-103 warn "cfs v3 need fsid" when vers is 3 and
# fsid empty; 105-111 default vers to 4 (3 when fsid is set); 132-135 options split on "," then vers=<vers> appended;
# 138-140 noresvport added when fsid is set; 141-146 over v3 the path becomes /<fsid><path> and nolock,proto=tcp
# are added.
CFS_NODE = "TencentCloud/kubernetes-csi-tencentcloud driver/cfs/node.go@defc12d0aa1cd9033474235ef3a670263c8fada4"


def parse_labels(pairs: list[str]) -> dict[str, str]:
    """`K=V` pairs -> labels; ValueError naming the first one Kubernetes would refuse."""
    labels: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not label_key_ok(key):
            raise ValueError(f"label {pair!r} is not KEY=VALUE with a Kubernetes label key ([prefix/]name: letters, "
                             "digits, - _ . , at most 63 characters)")
        if not label_value_ok(value):
            raise ValueError(f"label value {value!r} must be at most 63 letters, digits, - _ . (alphanumeric at "
                             "both ends)")
        labels[key] = value
    return labels


def csi_source(step: NfsMountStep, name: str, options: list[str]) -> tuple[dict[str, Any], list[str]]:
    """The PV's `csi` block for the vendor's driver and the mountOptions that go with it."""
    if step.vendor not in CSI_DRIVERS:
        raise ValueError(f"--driver csi needs a cloud vendor ({', '.join(CSI_DRIVERS)}); {step.vendor} shares use "
                         "the in-tree nfs source (--driver nfs)")
    driver = CSI_DRIVERS[step.vendor]
    if step.vendor == "aws-efs":
        found = _EFS_ID.match(step.server)
        if not found:
            raise ValueError(f"the EFS CSI driver needs the file system id: give --server fs-xxxxxxxx (or its DNS "
                             f"name fs-xxxxxxxx.efs.REGION.amazonaws.com), not {step.server!r}")
        handle = found.group(1) + ("" if step.export.rstrip("/") == "" else f":{step.export}")
        return {"driver": driver, "volumeHandle": handle, "volumeAttributes": {"encryptInTransit": "true"}}, []
    if step.vendor == "alibaba-nas":
        return {"driver": driver, "volumeHandle": name,
                "volumeAttributes": {"server": step.server, "path": step.export}}, options
    return {"driver": driver, "volumeHandle": name, "volumeAttributes": cfs_attributes(step, options)}, []


def cfs_attributes(step: NfsMountStep, options: list[str]) -> dict[str, str]:
    """Tencent CFS CSI volumeAttributes, as the driver's NodePublishVolume reads them (CFS_NODE above).

    The driver appends `vers=<vers>` to `options` itself, so `vers` leaves them but `minorversion=0` stays: `vers=4`
    alone lets the client negotiate the minor version, and CFS serves NFS 4.0. Over v3 CFS exports /<fsid>: the
    fsid goes in its own attribute (without it the driver warns "cfs v3 need fsid") and `path` is what follows it;
    the driver then mounts /<fsid><path> and adds noresvport, nolock and proto=tcp itself, so they leave `options`.
    """
    attributes = {"host": step.server, "path": step.export, "vers": "3" if step.nfs_version == "3" else "4"}
    dropped = {"vers", "nfsvers"}
    if attributes["vers"] == "3":
        fsid, _, rest = step.export.strip("/").partition("/")
        attributes.update(path=f"/{rest}", fsid=fsid)
        dropped |= {"noresvport", "nolock", "proto"}
    kept = [o for o in options if o.partition("=")[0] not in dropped]
    if kept:
        attributes["options"] = ",".join(kept)
    return attributes


def volume_manifests(step: NfsMountStep, name: str, size: str = "1Ti", namespace: str = "default",
                     labels: dict[str, str] | None = None, driver: str = "nfs") -> list[dict[str, Any]]:
    """PV (ReadWriteMany, Retain, no storage class) pre-bound to a PVC of the same name, and that PVC.

    With labels, the claim selects the PV by them (selector.matchLabels) instead of naming it.
    """
    if not DNS_NAME.match(name):
        raise ValueError(f"name must be a DNS-1123 name (lowercase letters, digits, - and .), got {name!r}")
    if not DNS_LABEL.match(namespace):
        raise ValueError(f"namespace must be a DNS-1123 label (at most 63 lowercase letters, digits and -, no dots), "
                         f"got {namespace!r}")
    if not _QUANTITY.match(size):
        raise ValueError(f"size must be a Kubernetes quantity like 100Gi or 1Ti, got {size!r}")
    if driver not in DRIVERS:
        raise ValueError(f"driver must be nfs (the in-tree source) or csi (the cloud's driver), got {driver!r}")
    options = [render([option]) for option in kernel_options(step.mount_options)]
    read_only = "ro" in options  # a read-only share is ReadOnlyMany for the scheduler too, not only at mount time
    modes = ["ReadOnlyMany"] if read_only else ["ReadWriteMany"]
    selected = dict(labels or {})
    all_labels = {"app.kubernetes.io/managed-by": "gpunode", **selected}
    spec: dict[str, Any] = {
        "capacity": {"storage": size},
        "accessModes": modes,
        "persistentVolumeReclaimPolicy": "Retain",
        "storageClassName": "",
    }
    if driver == "csi":
        source, options = csi_source(step, name, options)
        if options:
            spec["mountOptions"] = options
        spec["csi"] = source
    else:
        spec["mountOptions"] = options
        spec["nfs"] = {"server": step.server, "path": step.export, "readOnly": read_only}
    spec["claimRef"] = {"namespace": namespace, "name": name}
    volume = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name, "labels": all_labels},
              "spec": spec}
    claim_spec: dict[str, Any] = {"accessModes": modes, "storageClassName": ""}
    if selected:
        claim_spec["selector"] = {"matchLabels": selected}
    else:
        claim_spec["volumeName"] = name
    claim_spec["resources"] = {"requests": {"storage": size}}
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
             "metadata": {"name": name, "namespace": namespace, "labels": all_labels}, "spec": claim_spec}
    return [volume, claim]


def manifests_yaml(documents: list[dict[str, Any]]) -> str:
    """Multi-document YAML for `kubectl apply -f -`."""
    return yaml.safe_dump_all(documents, sort_keys=False, explicit_start=True)
