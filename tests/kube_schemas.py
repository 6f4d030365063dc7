"""The consumers of the Kubernetes objects the node-pool seeds write: kubernetes-validate --strict for the built-in
kinds, and for a TFJob the CRD's own openAPIV3Schema (kubeflow/training-operator, tests/data/kubeflow/SOURCES.md)
checked the way the API server's strict field validation does, plus the training operator's webhook rules."""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

VALIDATOR = Path(sys.executable).with_name("kubernetes-validate")
TFJOB_SCHEMA = Path(__file__).parent / "data" / "kubeflow" / "tfjob-v1-schema.json"


def kubernetes_validate(path: Path) -> subprocess.CompletedProcess[str]:
    """kubernetes-validate --strict on a file (every document in it)."""
    validator = str(VALIDATOR) if VALIDATOR.exists() else shutil.which("kubernetes-validate")
    assert validator, "kubernetes-validate is a test dependency (pip install -e '.[test]')"
    return subprocess.run([validator, "--strict", str(path)], capture_output=True, text=True)


def _strict(schema: Any) -> Any:
    """Unknown fields refused where the schema lists the properties (the API server's strict field validation: an
    object with `properties`, no `additionalProperties` and no x-kubernetes-preserve-unknown-fields)."""
    if isinstance(schema, list):
        return [_strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: _strict(item) for key, item in schema.items()}
    if ("properties" in out and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False
    return out


@cache
def tfjob_crd() -> dict[str, Any]:
    return json.loads(TFJOB_SCHEMA.read_text())


def tfjob_problems(document: dict[str, Any]) -> list[str]:
    """What the TFJob CRD (v1.9.0) and the training operator's webhook refuse in `document`; [] when accepted."""
    crd = tfjob_crd()
    found = []
    if document.get("apiVersion") != f"{crd['group']}/{crd['version']}" or document.get("kind") != crd["kind"]:
        found.append(f"not a {crd['group']}/{crd['version']} {crd['kind']}")
    schema = _strict(copy.deepcopy(crd["openAPIV3Schema"]))
    validator = jsonschema.Draft4Validator(schema)  # metadata: `type: object` only (the API server's ObjectMeta)
    found += [f"{'/'.join(map(str, e.absolute_path)) or '.'}: {e.message}" for e in validator.iter_errors(document)]
    # tfjob_webhook.go@6f74c7f:75: the job's name is a DNS-1035 label (NameIsDNS1035Label; apimachinery
    # pkg/util/validation/validation.go: "[a-z]([-a-z0-9]*[a-z0-9])?", at most 63 characters)
    name = str((document.get("metadata") or {}).get("name") or "")
    if len(name) > 63 or not re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", name):
        found.append(f"metadata.name: {name!r} should match a DNS-1035 label")
    # tfjob_webhook.go@6f74c7f:90-127: containers with images, one named tensorflow, at most one Chief/Master
    specs = (document.get("spec") or {}).get("tfReplicaSpecs") or {}
    if not specs:
        found.append("spec.tfReplicaSpecs: must be required")
    leaders = 0
    for role, spec in specs.items():
        containers = (((spec or {}).get("template") or {}).get("spec") or {}).get("containers") or []
        if not containers:
            found.append(f"{role}: containers must be specified")
        found += [f"{role}: container {i} needs an image" for i, c in enumerate(containers) if not c.get("image")]
        if not any(c.get("name") == "tensorflow" for c in containers):
            found.append(f"{role}: must have at least one container with name tensorflow")
        leaders += role in ("Chief", "Master")
    if leaders > 1:
        found.append("must not have more than 1 Chief or Master role")
    return found
