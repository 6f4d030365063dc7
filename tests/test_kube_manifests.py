"""Every Kubernetes manifest gpunode writes passes Kubernetes' own published schemas (kubernetes-validate, offline)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import run_cli

VALIDATOR = Path(sys.executable).with_name("kubernetes-validate")


def validate(path: Path) -> subprocess.CompletedProcess[str]:
    validator = str(VALIDATOR) if VALIDATOR.exists() else shutil.which("kubernetes-validate")
    assert validator, "kubernetes-validate is a test dependency (pip install -e '.[test]')"
    return subprocess.run([validator, "--strict", str(path)], capture_output=True, text=True)


@pytest.mark.parametrize("args", [
    ("runtime-class",),
    ("runtime-class", "--name", "nvidia-gpu", "--node-selector", "nvidia.com/gpu.present=true"),
    ("nfs-volume", "--server", "nas-1.cn-hangzhou.nas.aliyuncs.com", "--export", "/", "--name", "datasets",
     "--vendor", "alibaba-nas"),
    ("nfs-volume", "--server", "fs-0123.efs.us-east-1.amazonaws.com", "--export", "/", "--name", "ckpt",
     "--vendor", "aws-efs", "--size", "500Gi", "--namespace", "training"),
    ("nfs-volume", "--server", "10.0.0.5", "--export", "/datasets", "--name", "datasets", "--options", "ro"),
])
def test_manifests_pass_the_kubernetes_schemas_strictly(tmp_path, args):
    result = run_cli(*args)
    assert result.code == 0, result.output
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(result.stdout)
    checked = validate(manifest)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count("passed") == result.stdout.count("\nkind: ") + result.stdout.startswith("kind: ")


def test_the_validator_rejects_a_wrong_field(tmp_path):
    result = run_cli("runtime-class")
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(result.stdout.replace("handler: nvidia", "handler: nvidia\nhandlr: typo"))
    assert validate(manifest).returncode != 0


def test_runtime_class_refuses_bad_names():
    result = run_cli("runtime-class", "--handler", "NVIDIA_runtime")
    assert result.code == 2 and "handler must be a DNS label" in result.output
    result = run_cli("runtime-class", "--node-selector", "novalue")
    assert result.code == 2 and "KEY=VALUE" in result.output
    for bad in ("a b=c", "x=b=c", "gpu=has space", "-gpu=true"):
        result = run_cli("runtime-class", "--node-selector", bad)
        assert result.code == 2 and "is not a Kubernetes label" in result.output, bad


def test_a_read_only_share_is_read_only_for_kubernetes_too():
    """`--options ro` used to give mountOptions ro with readOnly false and ReadWriteMany (found by a new user)."""
    import yaml

    result = run_cli("nfs-volume", "--server", "10.0.0.5", "--export", "/datasets", "--name", "datasets",
                     "--options", "ro")
    volume, claim = yaml.safe_load_all(result.stdout)
    assert "ro" in volume["spec"]["mountOptions"] and volume["spec"]["nfs"]["readOnly"] is True
    assert volume["spec"]["accessModes"] == claim["spec"]["accessModes"] == ["ReadOnlyMany"]
