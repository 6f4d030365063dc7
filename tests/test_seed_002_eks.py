"""docs/seeds/002-tencent-eks.md: its commands, run as written, write a CFS volume and an EKS GPU pod that Kubernetes'
schemas accept strictly (the versions TKE runs) and that fit together."""

from __future__ import annotations

from pathlib import Path

from tests.serverless_seed import claim_of, page_commands, run_page
from tests.test_gpu_pod import VERSIONS

PAGE = "002-tencent-eks.md"


def test_the_pages_commands_write_what_it_says(tmp_path: Path) -> None:
    run = run_page(PAGE, tmp_path, VERSIONS["tke-eks"])
    assert run.applied == list(run.files) == ["cfs-volume.yaml", "gpu-pod.yaml"]
    pv, pvc = run.files["cfs-volume.yaml"]
    (pod,) = run.files["gpu-pod.yaml"]
    assert claim_of(pod) == (pvc["metadata"]["namespace"], pvc["metadata"]["name"]) == ("default", "tf-model-cfs")
    assert pvc["spec"]["volumeName"] == pv["metadata"]["name"]
    assert pv["spec"]["nfs"] == {"server": "10.0.1.8", "path": "/", "readOnly": False}
    assert pv["spec"]["mountOptions"] == ["vers=4", "minorversion=0", "hard", "timeo=600", "retrans=2", "noresvport"]
    assert pod["metadata"]["annotations"] == {"eks.tke.cloud.tencent.com/gpu-type": "T4"}
    (container,) = pod["spec"]["containers"]
    assert container["resources"] == {"limits": {"nvidia.com/gpu": "1"}}
    assert container["env"] == [{"name": "MODEL_DIR", "value": "/tf/model"}, {"name": "DATA_DIR", "value": "/tf/data"}]
    # the guide's shell line, with its variables left for the container's shell
    assert container["command"][:2] == ["sh", "-c"] and "--model_dir=$MODEL_DIR" in container["command"][2]
    assert container["volumeMounts"] == [{"name": "data", "mountPath": "/tf"}]


def test_the_page_runs_nothing_but_gpunode_and_kubectl_apply() -> None:
    assert [words[0] for words in page_commands(PAGE)] == ["gpunode", "gpunode", "kubectl"]
