"""Kubernetes manifests for GPU nodes: the RuntimeClass that sends pods to the nvidia runtime, and the naming
rules every manifest gpunode writes follows (object names, label keys and values)."""

from __future__ import annotations

import re
from typing import Any

DNS_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?\Z")  # object names (a DNS subdomain)
# namespaces, container and volume names: a DNS-1123 label, at most 63 characters, no dots (kubernetes/apimachinery
# pkg/util/validation/validation.go@eed236ce:155-161 dns1123LabelFmt, DNS1123LabelMaxLength; namespaces:
# pkg/api/validation/generic.go@eed236ce:69, ValidateNamespaceName = NameIsDNSLabel)
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")
_HANDLER = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")  # a DNS label: the CRI runtime handler name
# Label keys: [prefix/]name, the prefix a DNS subdomain of at most 253 characters; names and values up to 63
# alphanumerics with - _ . inside (values may be empty). Kubernetes' own rules.
_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?\Z")
_LABEL_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")


def label_key_ok(key: str) -> bool:
    prefix, slash, name = key.rpartition("/")
    return bool(_LABEL_NAME.match(name)) and (not slash or (len(prefix) <= 253 and bool(_LABEL_PREFIX.match(prefix))))


def label_value_ok(value: str) -> bool:
    return not value or bool(_LABEL_NAME.match(value))


def runtime_class(name: str = "nvidia", handler: str = "nvidia",
                  node_selector: dict[str, str] | None = None) -> dict[str, Any]:
    """A node.k8s.io/v1 RuntimeClass: pods with `runtimeClassName: <name>` run with containerd's `<handler>`
    runtime (the `nvidia` runtime gpunode adds), for clusters where nvidia is not the default runtime."""
    if not DNS_NAME.match(name):
        raise ValueError(f"name must be a DNS-1123 name (lowercase letters, digits, - and .), got {name!r}")
    if not _HANDLER.match(handler):
        raise ValueError(f"handler must be a DNS label (lowercase letters, digits and -), got {handler!r}")
    manifest: dict[str, Any] = {
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClass",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "gpunode"}},
        "handler": handler,
    }
    for key, value in (node_selector or {}).items():
        if not label_key_ok(key) or not label_value_ok(value):
            raise ValueError(f"node selector {key}={value} is not a Kubernetes label (keys like "
                             "nvidia.com/gpu.present, values of letters, digits, - _ . and at most 63 characters)")
    if node_selector:
        manifest["scheduling"] = {"nodeSelector": dict(node_selector)}
    return manifest
