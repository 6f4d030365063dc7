"""The training Pod or Job for a serverless GPU cloud: the user's image, command, GPU count and type, and the claim
`gpunode nfs-volume` wrote, with the cloud's annotations (facts.py). What a cloud's guide forbids is a `Refused`
naming the rule and the page it comes from."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from gpunode.gpupod.facts import ECI, EKS
from gpunode.kube import DNS_LABEL, DNS_NAME
from gpunode.vendor_facts import Fact

CLOUDS = ("eci", "tke-eks")
KINDS = ("pod", "job")
# ecs.<family>[-<shape>].<size>: ecs.gn6i-c4g1.xlarge, ecs.vgn7i-vws-m4.xlarge, ecs.c6.xlarge
_ECS_TYPE = re.compile(r"^ecs\.([a-z0-9]+(?:-vws)?)(?:-[a-z0-9]+)?\.[a-z0-9]+\Z")
_VCPU_MEM = re.compile(r"^[0-9.]+-[0-9.]+Gi\Z")  # ECI's vCPU-memory form, e.g. 2-4Gi
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*\Z")  # Kubernetes' C_IDENTIFIER-like env var names
_CPU = re.compile(r"^[0-9]+(\.[0-9]+)?\Z")
_GI = re.compile(r"^[0-9]+(\.[0-9]+)?Gi\Z")


class Refused(ValueError):
    """A combination the cloud's guide forbids: the rule, and where it is written."""

    def __init__(self, rule: str, fact: Fact[Any] | None = None) -> None:
        super().__init__(f"{rule} (source: {fact.source})" if fact else rule)
        self.fact = fact


@dataclass
class GpuPod:
    """What the user asks for; `manifest()` checks it against the cloud's rules and writes the object."""

    cloud: str
    image: str
    command: str
    gpus: int
    gpu_type: str
    pvc: str
    mount_path: str
    name: str = "train"
    namespace: str = "default"
    kind: str = "pod"
    env: dict[str, str] = field(default_factory=dict)
    cpu: str | None = None      # Tencent EKS: the pod's cores (annotation), with memory
    memory: str | None = None   # Tencent EKS: the pod's memory in Gi (annotation), with cpu

    def manifest(self) -> dict[str, Any]:
        """The Pod (or batch/v1 Job) as a dict, after every check."""
        self._check_common()
        annotations = eci_annotations(self) if self.cloud == "eci" else eks_annotations(self)
        labels = {"app.kubernetes.io/managed-by": "gpunode", "app.kubernetes.io/name": self.name}
        if self.cloud == "eci":
            key, value = ECI["eci_label"].value
            labels[key] = value
        pod_spec = self._pod_spec()
        if self.kind == "pod":
            return {"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": self.name, "namespace": self.namespace, "labels": labels,
                                 "annotations": annotations}, "spec": pod_spec}
        # the clouds read the annotations from the pod, so on a Job they go on spec.template.metadata
        return {"apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": self.name, "namespace": self.namespace,
                             "labels": {"app.kubernetes.io/managed-by": "gpunode"}},
                "spec": {"template": {"metadata": {"labels": labels, "annotations": annotations}, "spec": pod_spec}}}

    def _check_common(self) -> None:
        if self.cloud not in CLOUDS:
            raise Refused(f"--cloud must be one of {', '.join(CLOUDS)}, got {self.cloud!r}")
        if self.kind not in KINDS:
            raise Refused(f"--kind must be pod or job, got {self.kind!r}")
        for what, value in (("--name", self.name), ("--namespace", self.namespace), ("--pvc", self.pvc)):
            if not value or not DNS_NAME.match(value) or (what == "--name" and len(value) > 63):
                most = "at most 63 characters: " if what == "--name" else ""
                raise Refused(f"{what} must be a DNS-1123 name ({most}lowercase letters, digits, - and .), got "
                              f"{value!r}")
        if not DNS_LABEL.match(self.namespace):
            raise Refused(f"--namespace must be a DNS-1123 label (at most 63 lowercase letters, digits and -, no "
                          f"dots: Kubernetes' ValidateNamespaceName), got {self.namespace!r}")
        if not self.image or any(c.isspace() for c in self.image):
            raise Refused(f"--image must be an image reference without spaces, got {self.image!r}")
        if not self.command.strip():
            raise Refused("--command must be the training command (run with sh -c)")
        if not self.mount_path.startswith("/") or ":" in self.mount_path:
            raise Refused(f"--mount-path must be an absolute path inside the container, got {self.mount_path!r}")
        limit = ECI["gpu_limit_required"] if self.cloud == "eci" else EKS["limit_required"]
        if self.gpus < 1:
            raise Refused(f"--gpus must be 1 or more: the {limit.value} limit is what gives the container its "
                          "GPUs", limit)
        for key in self.env:
            if not _ENV_NAME.match(key):
                raise Refused(f"--env name {key!r} is not a valid environment variable name")

    def _pod_spec(self) -> dict[str, Any]:
        container: dict[str, Any] = {
            "name": self.name if len(self.name) <= 63 and "." not in self.name else "train",
            "image": self.image,
            "command": ["sh", "-c", self.command],
        }
        if self.env:
            container["env"] = [{"name": k, "value": v} for k, v in self.env.items()]
        # limits only: a GPU limit alone is also the request, and a request must equal it (facts: request_equals_limit)
        container["resources"] = {"limits": {"nvidia.com/gpu": str(self.gpus)}}
        container["volumeMounts"] = [{"name": "data", "mountPath": self.mount_path}]
        # OnFailure as in both seed guides (a Job allows it too; its backoffLimit stays Kubernetes' default)
        return {"containers": [container], "restartPolicy": "OnFailure",
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": self.pvc}}]}


def eci_annotations(pod: GpuPod) -> dict[str, str]:
    """`k8s.aliyun.com/eci-use-specs` from --gpu-type: ECS GPU instance types ECI runs, in priority order."""
    specs = [s.strip() for s in pod.gpu_type.split(",")]
    if pod.cpu or pod.memory:
        raise Refused("--cpu/--memory are Tencent EKS annotations; on ECI the GPU instance type in --gpu-type fixes "
                      "the vCPUs and memory, and GPU types may not be mixed with vCPU-memory specifications",
                      ECI["gpu_specs_alone"])
    most = ECI["specs_max"]
    if len(specs) > most.value:
        raise Refused(f"--gpu-type lists {len(specs)} specifications; eci-use-specs takes at most {most.value}", most)
    families = ECI["gpu_families"]
    for spec in specs:
        if _VCPU_MEM.match(spec):
            raise Refused(f"--gpu-type {spec!r} is a vCPU-memory specification: GPU instance types may not be "
                          "listed with them", ECI["gpu_specs_alone"])
        found = _ECS_TYPE.match(spec)
        if not found:
            raise Refused(f"--gpu-type {spec!r} is not an ECS instance type (ecs.<family>[-<shape>].<size>, "
                          "e.g. ecs.gn6i-c4g1.xlarge)", ECI["specs_annotation"])
        if found.group(1) not in families.value:
            mixed = "; GPU types may not be mixed with other kinds" if len(specs) > 1 else ""
            raise Refused(f"--gpu-type {spec!r}: {found.group(1)} is not a GPU family ECI runs "
                          f"({', '.join(families.value)}){mixed}", families)
    return {ECI["specs_annotation"].value: ",".join(specs)}


def eks_annotations(pod: GpuPod) -> dict[str, str]:
    """`eks.tke.cloud.tencent.com/gpu-type` (and, with --cpu and --memory, gpu-count, cpu and mem together)."""
    types = [t.strip() for t in pod.gpu_type.split(",")]
    known = EKS["gpu_types"]
    unknown = [t for t in types if t not in known.value]
    if unknown or not types:
        named = ", ".join(t for t in unknown if t) or repr(pod.gpu_type)  # "T4,,V100": the whole value
        raise Refused(f"--gpu-type {named} is not a GPU model Tencent EKS "
                      f"documents ({', '.join(known.value)}; several in priority order, comma-separated)", known)
    annotations = {EKS["gpu_type_annotation"].value: ",".join(types)}
    if (pod.cpu is None) != (pod.memory is None):
        raise Refused("--cpu and --memory go together: the cpu and mem annotations must both be written, or "
                      "neither (gpu-type alone is enough)", EKS["cpu_mem_together"])
    if pod.cpu is None or pod.memory is None:
        return annotations
    if not _CPU.match(pod.cpu) or float(pod.cpu) <= 0:
        raise Refused(f"--cpu must be a number of cores like 8, got {pod.cpu!r}", EKS["cpu_annotation"])
    if not _GI.match(pod.memory):
        raise Refused(f"--memory must be in Gi, like 32Gi (G is a parameter error), got {pod.memory!r}",
                      EKS["mem_annotation"])
    # the annotations pin the pod's specification, so the count is written with them (gpu-count needs cpu and mem)
    annotations[EKS["cpu_annotation"].value] = pod.cpu
    annotations[EKS["mem_annotation"].value] = pod.memory
    annotations[EKS["gpu_count_annotation"].value] = str(pod.gpus)
    return annotations
