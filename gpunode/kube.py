"""Kubernetes manifests for GPU nodes: the RuntimeClass that sends pods to the nvidia runtime."""

from __future__ import annotations

import re
from typing import Any

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?\Z")
_HANDLER = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")  # a DNS label: the CRI runtime handler name


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
    if node_selector:
        manifest["scheduling"] = {"nodeSelector": dict(node_selector)}
    return manifest
