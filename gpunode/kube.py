"""Kubernetes manifests for GPU nodes: the RuntimeClass that sends pods to the nvidia runtime."""

from __future__ import annotations

import re
from typing import Any

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?\Z")
_HANDLER = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")  # a DNS label: the CRI runtime handler name
# Label keys: an optional DNS-subdomain prefix and "/", then a name; values: empty or a name (63 characters at most).
_LABEL_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_LABEL_KEY = re.compile(rf"^([a-z0-9]([-a-z0-9.]{{0,251}}[a-z0-9])?/)?{_LABEL_NAME}\Z")
_LABEL_VALUE = re.compile(rf"^({_LABEL_NAME})?\Z")


def runtime_class(name: str = "nvidia", handler: str = "nvidia",
                  node_selector: dict[str, str] | None = None) -> dict[str, Any]:
    """A node.k8s.io/v1 RuntimeClass: pods with `runtimeClassName: <name>` run with containerd's `<handler>`
    runtime (the `nvidia` runtime gpunode adds), for clusters where nvidia is not the default runtime."""
    if not _NAME.match(name):
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
        if not _LABEL_KEY.match(key) or not _LABEL_VALUE.match(value):
            raise ValueError(f"node selector {key}={value} is not a Kubernetes label (keys like "
                             "nvidia.com/gpu.present, values of letters, digits, - _ . and at most 63 characters)")
    if node_selector:
        manifest["scheduling"] = {"nodeSelector": dict(node_selector)}
    return manifest
