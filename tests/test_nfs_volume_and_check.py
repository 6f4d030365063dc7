"""`nfs-volume` YAML (PV + PVC for kubectl) and check_mounts (facts vs the mounts the inventory expects)."""

from __future__ import annotations

import yaml

from gpunode.facts.model import Facts, Mount, StorageInfo
from gpunode.steps.nfs.check import check_mounts
from gpunode.steps.nfs.fstab import edit
from tests.conftest import run_cli
from tests.test_nfs_options import ALIBABA_V3_LIVE, EFS_LIVE


def test_nfs_volume_prints_a_bound_pv_and_pvc_pair():
    result = run_cli("nfs-volume", "--server", "fs-0a1b.efs.us-east-1.amazonaws.com", "--export", "/",
                     "--name", "datasets", "--vendor", "aws-efs", "--size", "500Gi", "--namespace", "training")
    assert result.code == 0, result.output
    pv, pvc = list(yaml.safe_load_all(result.stdout))
    assert (pv["apiVersion"], pv["kind"], pvc["kind"]) == ("v1", "PersistentVolume", "PersistentVolumeClaim")
    assert pv["spec"]["accessModes"] == pvc["spec"]["accessModes"] == ["ReadWriteMany"]
    assert pv["spec"]["nfs"] == {"server": "fs-0a1b.efs.us-east-1.amazonaws.com", "path": "/", "readOnly": False}
    assert pv["spec"]["mountOptions"] == ["nfsvers=4.1", "rsize=1048576", "wsize=1048576", "hard", "timeo=600",
                                          "retrans=2", "noresvport"]  # the EFS preset without _netdev
    assert pv["spec"]["storageClassName"] == pvc["spec"]["storageClassName"] == ""  # no dynamic provisioning
    assert pvc["spec"]["volumeName"] == pv["metadata"]["name"] == "datasets"
    assert pv["spec"]["claimRef"] == {"namespace": "training", "name": "datasets"}
    assert pv["spec"]["capacity"]["storage"] == pvc["spec"]["resources"]["requests"]["storage"] == "500Gi"
    assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Retain"


def test_nfs_volume_refuses_bad_input_with_exit_2():
    assert run_cli("nfs-volume", "--server", "nas", "--export", "/", "--name", "Data_Sets").code == 2
    assert run_cli("nfs-volume", "--server", "nas", "--export", "/", "--name", "d", "--size", "lots").code == 2
    bad = run_cli("nfs-volume", "--server", "nas", "--export", "/", "--name", "d", "--vendor", "aws-efs",
                  "--nfs-version", "3")
    assert bad.code == 2 and "aws-efs supports NFS 4.0 and 4.1" in bad.stderr
    for args, words in ((("--name", "Data_Sets"), "DNS-1123 name"), (("--name", "d", "--size", "lots"), "quantity"),
                        (("--name", "d", "--namespace", "team.a"), "DNS-1123 label"),
                        (("--name", "d", "--driver", "flex"), "driver must be")):
        refused = run_cli("nfs-volume", "--server", "nas", "--export", "/", *args)
        assert refused.code == 2 and words in refused.stderr and "fix:" in refused.stderr, refused.output


def test_check_mounts_reports_each_expected_share():
    expected = [
        {"server": "nas-a.cn-hangzhou.nas.aliyuncs.com", "export": "/", "path": "/mnt/nas", "vendor": "alibaba-nas"},
        {"server": "fs-1.efs.us-east-1.amazonaws.com", "export": "/", "path": "/mnt/efs", "vendor": "aws-efs"},
        {"server": "10.0.0.9", "export": "/ckpt", "path": "/mnt/ckpt"},
        {"server": "10.0.0.9", "export": "/data", "path": "/mnt/data"},
        {"server": "10.0.0.9", "export": "/x", "path": "relative"},
    ]
    fstab = edit("", "/mnt/ckpt", "10.0.0.9:/ckpt /mnt/ckpt nfs vers=4.1,hard 0 0")
    facts = Facts(storage=StorageInfo(fstab_text=fstab, mounts=(
        Mount("nas-a.cn-hangzhou.nas.aliyuncs.com:/", "/mnt/nas", "nfs", ALIBABA_V3_LIVE),
        Mount("fs-1.efs.us-east-1.amazonaws.com:/", "/mnt/efs", "nfs4", EFS_LIVE.replace("hard", "soft")),
        Mount("10.0.0.7:/data", "/mnt/data", "nfs4", EFS_LIVE),
    )))
    nas, efs, ckpt, data, bad = check_mounts(facts, expected)
    assert nas["status"] == "ok" and nas["source"] == "nas-a.cn-hangzhou.nas.aliyuncs.com:/"
    assert efs["status"] == "wrong-options" and efs["differences"] == ["soft (wanted hard)"]
    assert ckpt["status"] == "missing" and ckpt["in_fstab"] and ckpt["managed"]
    assert "fstab line is there" in ckpt["message"]
    assert data["status"] == "wrong-source" and data["live_source"] == "10.0.0.7:/data"
    assert bad["status"] == "invalid" and "absolute" in bad["message"]
