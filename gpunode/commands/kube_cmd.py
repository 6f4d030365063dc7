"""`gpunode k8s-manifest`: the Kubernetes objects a self-managed GPU node pool needs beside what gpunode provisions.

- `device-plugin`: NVIDIA's device plugin DaemonSet as NVIDIA publishes it (deployments/static/nvidia-device-plugin.yml
  of NVIDIA/k8s-device-plugin at a pinned release): it advertises `nvidia.com/gpu` to the scheduler. ACK and TKE GPU
  node pools run their own; this one is for nodes you provision yourself.
- `tfjob`: a Kubeflow TFJob (kubeflow.org/v1, the training operator) whose replicas mount the PersistentVolumeClaim
  that `gpunode nfs-volume` writes: the distributed TensorFlow job of a Kubeflow user (seed 003).
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from gpunode.commands.common import option_pairs
from gpunode.errors import UsageError
from gpunode.kube import DNS_LABEL, DNS_NAME
from gpunode.vendor_facts import Fact, Pin, fact_table, value

DEVICE_PLUGIN_PIN = Pin("NVIDIA/k8s-device-plugin", "1b826acc6af3079d8923bac395c3124b8861a9a6")  # tag v0.20.0
_STATIC = "deployments/static/nvidia-device-plugin.yml"
TRAINING_OPERATOR_PIN = Pin("kubeflow/training-operator", "6f74c7f6b2ed6c27aabd82d0a316b23f0646059c")  # tag v1.9.0
_TF_TYPES = "pkg/apis/kubeflow.org/v1/tensorflow_types.go"
_CRD = "manifests/base/crds/kubeflow.org_tfjobs.yaml"
_TF_WEBHOOK = "kubeflow/training-operator pkg/webhooks/tensorflow/tfjob_webhook.go@6f74c7f"
# apimachinery pkg/util/validation/validation.go: dns1035LabelFmt "[a-z]([-a-z0-9]*[a-z0-9])?", at most 63
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?\Z")

KUBE_MANIFESTS = fact_table("kube_manifests", {
    "device_plugin_image": Fact("nvcr.io/nvidia/k8s-device-plugin:v0.20.0", DEVICE_PLUGIN_PIN.at(_STATIC, "41"),
                                "the static manifest of release v0.20.0 (tag v0.20.0 = the commit of the pin)"),
    "device_plugin_dir": Fact("/var/lib/kubelet/device-plugins", DEVICE_PLUGIN_PIN.at(_STATIC, "48-55"),
                              "a hostPath volume of type Directory mounted at the same path: kubelet's device plugin "
                              "sockets"),
    "device_plugin_toleration": Fact({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                                     DEVICE_PLUGIN_PIN.at(_STATIC, "31-34"),
                                     "so the plugin runs on GPU nodes tainted nvidia.com/gpu"),
    "tfjob_api": Fact("kubeflow.org/v1", TRAINING_OPERATOR_PIN.at(_CRD, "8-14"),
                      "the TFJob CRD's group and kind; v1 is its only version"),
    "tfjob_container": Fact("tensorflow", TRAINING_OPERATOR_PIN.at(_TF_TYPES, "26"),
                            "TFJobDefaultContainerName: the webhook refuses a replica without a container of this name "
                            "(pkg/webhooks/tensorflow/tfjob_webhook.go:118-121)"),
    "tfjob_roles": Fact(("Chief", "Worker", "PS"), TRAINING_OPERATOR_PIN.at(_TF_TYPES, "104-119"),
                        "replica types; Master is kept only for backward compatibility (seed 003's MASTER is Chief "
                        "now); at most one Chief or Master (tfjob_webhook.go:123-125)"),
})


def device_plugin() -> list[dict[str, Any]]:
    """NVIDIA's static DaemonSet, field for field (kube-system, system-node-critical, the nvidia.com/gpu toleration,
    no privilege escalation, all capabilities dropped, kubelet's device-plugins folder)."""
    labels = {"name": "nvidia-device-plugin-ds"}
    folder = value(KUBE_MANIFESTS, "device_plugin_dir")
    container = {"image": value(KUBE_MANIFESTS, "device_plugin_image"), "name": "nvidia-device-plugin-ctr",
                 "env": [], "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                 "volumeMounts": [{"name": "kubelet-device-plugins-dir", "mountPath": folder}]}
    return [{
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "nvidia-device-plugin-daemonset", "namespace": "kube-system"},
        "spec": {"selector": {"matchLabels": labels}, "updateStrategy": {"type": "RollingUpdate"},
                 "template": {"metadata": {"labels": dict(labels)}, "spec": {  # a copy: no YAML anchor
                     "tolerations": [dict(value(KUBE_MANIFESTS, "device_plugin_toleration"))],
                     "priorityClassName": "system-node-critical", "containers": [container],
                     "volumes": [{"name": "kubelet-device-plugins-dir",
                                  "hostPath": {"path": folder, "type": "Directory"}}]}}}}]


def _replica(count: int, image: str, command: list[str], gpus: int, claim: str, mount_path: str,
             env: dict[str, str]) -> dict[str, Any]:
    container: dict[str, Any] = {"name": value(KUBE_MANIFESTS, "tfjob_container"), "image": image}
    if command:
        container["command"] = list(command)  # a list of its own: no YAML anchors shared between replicas
    if env:
        container["env"] = [{"name": k, "value": v} for k, v in env.items()]
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": gpus}}
    # a volume's name is a DNS label (kubernetes/kubernetes pkg/apis/core/validation/validation.go@000f2605,
    # ValidateVolumes: ValidateDNS1123Label(vol.Name)), a claim's may have dots: such a claim gets the volume "data"
    volume = claim if DNS_LABEL.match(claim) else "data"
    container["volumeMounts"] = [{"name": volume, "mountPath": mount_path}]
    return {"replicas": count, "restartPolicy": "OnFailure", "template": {"spec": {
        "containers": [container], "volumes": [{"name": volume, "persistentVolumeClaim": {"claimName": claim}}]}}}


def tfjob(name: str, image: str, claim: str, *, ps_image: str = "", command: str = "", mount_path: str = "/training",
          chief: bool = True, workers: int = 1, ps: int = 1, gpus: int = 1, namespace: str = "default",
          env: list[str] | None = None) -> list[dict[str, Any]]:
    """A TFJob: an optional Chief and the Workers with `gpus` GPUs each, the parameter servers without GPUs (on
    `ps_image`, default `image`); every replica mounts the claim at `mount_path`. Bad values: UsageError."""
    for label, text in (("--name", name), ("--claim", claim), ("--namespace", namespace)):
        if not DNS_NAME.match(text or ""):
            raise UsageError(f"{label} {text!r} is not a Kubernetes name (lowercase letters, digits, - and .)",
                             fix=f"e.g. {label} mnist" if label != "--claim" else
                             "the --name you gave `gpunode nfs-volume` (its PersistentVolumeClaim)")
    if not DNS_LABEL.match(namespace):
        raise UsageError(f"--namespace {namespace!r} is not a namespace name: at most 63 lowercase letters, digits "
                         "and -, no dots (kubernetes/apimachinery pkg/api/validation/generic.go: "
                         "ValidateNamespaceName = NameIsDNSLabel)", fix="e.g. --namespace training")
    if not _DNS1035.match(name):
        raise UsageError(f"--name {name!r} is refused by the training operator's webhook: a TFJob name is a DNS-1035 "
                         "label, at most 63 characters, a lowercase letter first, then lowercase letters, digits and "
                         f"- ({_TF_WEBHOOK}:75, NameIsDNS1035Label)", fix="e.g. --name mnist-dist")
    if not image:
        raise UsageError("k8s-manifest tfjob needs --image", fix="e.g. --image registry.example/tf-mnist:gpu")
    if not mount_path.startswith("/"):
        raise UsageError(f"--mount-path {mount_path!r} is not an absolute path", fix="e.g. --mount-path /training")
    if workers < 1 or ps < 0 or gpus < 0:
        raise UsageError("--workers must be at least 1, --ps and --gpus at least 0",
                         fix="e.g. --workers 2 --ps 1 --gpus 1")
    variables = option_pairs(env, "--env", "NAME=VALUE", "TEST_TMPDIR=/training")
    try:
        argv = shlex.split(command)
    except ValueError as exc:  # an unclosed quote
        raise UsageError(f"--command {command!r} is not a command line: {exc}",
                         fix="close the quote, e.g. --command \"python /app/main.py --data '/training/my data'\""
                         ) from None
    specs: dict[str, Any] = {}
    if chief:
        specs["Chief"] = _replica(1, image, argv, gpus, claim, mount_path, variables)
    specs["Worker"] = _replica(workers, image, argv, gpus, claim, mount_path, variables)
    if ps:
        specs["PS"] = _replica(ps, ps_image or image, argv, 0, claim, mount_path, variables)
    return [{"apiVersion": value(KUBE_MANIFESTS, "tfjob_api"), "kind": "TFJob",
             "metadata": {"name": name, "namespace": namespace, "labels": {"app.kubernetes.io/managed-by": "gpunode"}},
             "spec": {"tfReplicaSpecs": specs}}]
