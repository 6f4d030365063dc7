"""nfs-volume: labels the claim selects, and the clouds' CSI drivers; every variant through kubernetes-validate."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.conftest import run_cli
from tests.test_kube_manifests import validate

ALIBABA = ("--server", "0cd8b4a576-uih75.cn-hangzhou.nas.aliyuncs.com", "--export", "/train", "--vendor",
           "alibaba-nas")
EFS = ("--server", "fs-0123456789abcdef0.efs.us-east-1.amazonaws.com", "--export", "/", "--vendor", "aws-efs")
TENCENT = ("--server", "10.0.0.112", "--export", "/", "--vendor", "tencent-cfs")
GENERIC = ("--server", "nas.example.internal", "--export", "/data")


def volume(tmp_path: Path, *args: str) -> tuple[dict, dict]:
    """Run nfs-volume, validate its output strictly against Kubernetes' schemas, return (PV, PVC)."""
    result = run_cli("nfs-volume", "--name", "mnist", *args)
    assert result.code == 0, result.output
    manifest = tmp_path / "volume.yaml"
    manifest.write_text(result.stdout)
    checked = validate(manifest)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count("passed") == 2
    pv, pvc = yaml.safe_load_all(result.stdout)
    return pv, pvc


LABELS = ("--label", "train=mnist", "--label", "example.com/team=vision")
# every source with every driver it has (a generic server has no CSI driver: refused, see the exit-2 test)
VARIANTS = [(source, driver, labels) for source in (ALIBABA, EFS, TENCENT, GENERIC) for driver in ("nfs", "csi")
            for labels in ((), LABELS) if not (driver == "csi" and source is GENERIC)]


@pytest.mark.parametrize(("source", "driver", "labels"), VARIANTS)
def test_every_variant_passes_the_schemas(tmp_path: Path, source, driver, labels) -> None:
    pv, pvc = volume(tmp_path, *source, "--driver", driver, *labels)
    assert ("csi" in pv["spec"]) == (driver == "csi") and ("nfs" in pv["spec"]) == (driver == "nfs")
    if labels:
        wanted = {"train": "mnist", "example.com/team": "vision"}
        assert pvc["spec"]["selector"] == {"matchLabels": wanted} and "volumeName" not in pvc["spec"]
        assert wanted.items() <= pv["metadata"]["labels"].items()
    else:
        assert pvc["spec"]["volumeName"] == "mnist" and "selector" not in pvc["spec"]


def test_the_csi_sources_carry_each_drivers_documented_attributes(tmp_path: Path) -> None:
    pv, _ = volume(tmp_path, *ALIBABA, "--driver", "csi")
    assert pv["spec"]["csi"] == {"driver": "nasplugin.csi.alibabacloud.com", "volumeHandle": "mnist",
                                 "volumeAttributes": {"server": ALIBABA[1], "path": "/train"}}
    assert "vers=3" in pv["spec"]["mountOptions"] and "noresvport" in pv["spec"]["mountOptions"]

    pv, _ = volume(tmp_path, *EFS, "--driver", "csi")
    assert pv["spec"]["csi"] == {"driver": "efs.csi.aws.com", "volumeHandle": "fs-0123456789abcdef0",
                                 "volumeAttributes": {"encryptInTransit": "true"}}
    assert "mountOptions" not in pv["spec"]  # efs-utils chooses them
    pv, _ = volume(tmp_path, "--server", "fs-0123456789abcdef0", "--export", "/ckpt", "--vendor", "aws-efs",
                   "--driver", "csi")
    assert pv["spec"]["csi"]["volumeHandle"] == "fs-0123456789abcdef0:/ckpt"

    pv, _ = volume(tmp_path, *TENCENT, "--driver", "csi", "--options", "soft")
    attributes = pv["spec"]["csi"]["volumeAttributes"]
    assert pv["spec"]["csi"]["driver"] == "com.tencent.cloud.csi.cfs" and pv["spec"]["csi"]["volumeHandle"] == "mnist"
    assert attributes["host"] == "10.0.0.112" and attributes["path"] == "/" and attributes["vers"] == "4"
    options = attributes["options"].split(",")
    keys = [o.partition("=")[0] for o in options]
    assert "soft" in keys and not {"vers", "nfsvers"} & set(keys)  # the driver appends vers=<vers> itself
    # ... but the minor version stays: vers=4 alone lets the client negotiate it, and CFS serves 4.0
    assert "minorversion=0" in options and "fsid" not in attributes


def test_tencent_cfs_over_v3_gives_the_csi_driver_its_fsid(tmp_path: Path) -> None:
    """Over v3 CFS exports /<fsid>: the driver wants the fsid attribute (it warns "cfs v3 need fsid" without it),
    mounts /<fsid><path> itself and adds noresvport,nolock,proto=tcp (driver/cfs/node.go 101-103, 138-146)."""
    for export, path in (("/jryi5l0k", "/"), ("/jryi5l0k/mnist/ckpt", "/mnist/ckpt")):
        pv, _ = volume(tmp_path, "--server", "10.0.0.112", "--export", export, "--vendor", "tencent-cfs",
                       "--nfs-version", "3", "--driver", "csi")
        attributes = pv["spec"]["csi"]["volumeAttributes"]
        assert attributes["vers"] == "3" and attributes["fsid"] == "jryi5l0k" and attributes["path"] == path
        keys = {o.partition("=")[0] for o in attributes["options"].split(",")}
        assert not keys & {"vers", "nfsvers", "noresvport", "nolock", "proto"}  # the driver's own, not twice
        assert {"hard", "timeo", "retrans"} <= keys


def test_the_validator_rejects_a_wrong_csi_field(tmp_path: Path) -> None:
    result = run_cli("nfs-volume", "--name", "mnist", *ALIBABA, "--driver", "csi")
    manifest = tmp_path / "volume.yaml"
    manifest.write_text(result.stdout.replace("volumeHandle:", "volumeHandel:"))
    assert validate(manifest).returncode != 0


@pytest.mark.parametrize(("args", "message"), [
    ((*GENERIC, "--driver", "csi"), "--driver csi needs a cloud vendor"),
    ((*GENERIC, "--driver", "flex"), "driver must be nfs"),
    (("--server", "nas.example.internal", "--export", "/", "--vendor", "aws-efs", "--driver", "csi"),
     "the EFS CSI driver needs the file system id"),
    ((*GENERIC, "--label", "novalue"), "is not KEY=VALUE"),
    ((*GENERIC, "--label", "team=a b"), "label value 'a b'"),
    ((*GENERIC, "--label", "-bad=x"), "label '-bad=x'"),
])
def test_bad_input_exits_2_naming_the_fix(args, message) -> None:
    result = run_cli("nfs-volume", "--name", "mnist", *args)
    assert result.code == 2, result.output
    assert message in result.output
