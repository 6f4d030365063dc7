"""docs/seeds/000-alibaba-eci.md: its commands, run as written, write a NAS volume and an ECI GPU pod that Kubernetes'
schemas accept strictly (the versions ACK runs) and that fit together."""

from __future__ import annotations

from pathlib import Path

from tests.serverless_seed import claim_of, page_commands, run_page
from tests.test_gpu_pod import VERSIONS

PAGE = "000-alibaba-eci.md"


def test_the_pages_commands_write_what_it_says(tmp_path: Path) -> None:
    run = run_page(PAGE, tmp_path, VERSIONS["eci"])
    assert run.applied == list(run.files) == ["nas-volume.yaml", "gpu-pod.yaml"]
    pv, pvc = run.files["nas-volume.yaml"]
    (pod,) = run.files["gpu-pod.yaml"]
    assert (pv["kind"], pvc["kind"], pod["kind"]) == ("PersistentVolume", "PersistentVolumeClaim", "Pod")
    # the pod mounts the claim nfs-volume wrote, in its namespace, and the claim is bound to that volume
    assert claim_of(pod) == (pvc["metadata"]["namespace"], pvc["metadata"]["name"]) == ("default", "nas-train")
    assert pvc["spec"]["volumeName"] == pv["metadata"]["name"]
    assert pv["spec"]["csi"]["driver"] == "nasplugin.csi.alibabacloud.com" and "vers=3" in pv["spec"]["mountOptions"]
    # what the page's table says the pod carries
    assert pod["metadata"]["annotations"] == {"k8s.aliyun.com/eci-use-specs": "ecs.gn6i-c4g1.xlarge"}
    assert pod["metadata"]["labels"]["alibabacloud.com/eci"] == "true"
    (container,) = pod["spec"]["containers"]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert container["volumeMounts"][0]["mountPath"] == "/tmp/imagenet"


def test_the_page_runs_nothing_but_gpunode_and_kubectl_apply() -> None:
    assert [words[0] for words in page_commands(PAGE)] == ["gpunode", "gpunode", "kubectl"]
