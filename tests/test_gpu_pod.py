"""gpu-pod: the training Pod/Job for Alibaba ECI and Tencent EKS, accepted by Kubernetes' own schemas (strict) for
the versions those clouds run, and the combinations their guides forbid refused with the rule and its page."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from gpunode.gpupod.facts import ECI, EKS
from gpunode.gpupod.manifest import GpuPod, Refused
from gpunode.vendor_facts import TABLES
from tests.conftest import run_cli
from tests.test_kube_manifests import VALIDATOR

# The Kubernetes versions the clouds offer today: ACK (managed, with ECI virtual nodes) 1.34, 1.35, 1.36
# (https://www.alibabacloud.com/help/en/ack/product-overview/release-notes-for-kubernetes-versions); TKE's
# latest major-version notes cover 1.28 and 1.30 (https://www.tencentcloud.com/document/product/457/38179).
VERSIONS = {"eci": ("1.34.0", "1.35.0", "1.36.0"), "tke-eks": ("1.28.0", "1.30.0")}

ECI_ARGS = ("--cloud", "eci", "--image", "registry-vpc.cn-beijing.aliyuncs.com/eci/tensorflow:1.0",
            "--command", "python models/tutorials/image/imagenet/classify_image.py",
            "--gpu-type", "ecs.gn6i-c4g1.xlarge", "--pvc", "nas-train", "--mount-path", "/tmp/imagenet")
EKS_ARGS = ("--cloud", "tke-eks", "--image", "hkccr.ccs.tencentyun.com/carltk/tensorflow-model:latest",
            "--command", "python3 official/vision/image_classification/mnist_main.py --model_dir=$MODEL_DIR",
            "--pvc", "tf-model-cfs", "--mount-path", "/tf", "--env", "MODEL_DIR=/tf/model")


def strict(path: Path, version: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(VALIDATOR), "--strict", "-k", version, str(path)], capture_output=True, text=True)


def written(tmp_path: Path, *args: str) -> dict:
    """Run gpu-pod, check its output against every version the cloud runs, return the object."""
    result = run_cli("gpu-pod", *args)
    assert result.code == 0, result.output
    manifest = tmp_path / "train.yaml"
    manifest.write_text(result.stdout)
    cloud = args[args.index("--cloud") + 1]
    for version in VERSIONS[cloud]:
        checked = strict(manifest, version)
        assert checked.returncode == 0 and "passed" in checked.stdout, (version, checked.stdout + checked.stderr)
    (document,) = yaml.safe_load_all(result.stdout)
    return document


def pod_template(document: dict) -> dict:
    return document["spec"]["template"] if document["kind"] == "Job" else document


@pytest.mark.parametrize("kind", ["pod", "job"])
def test_eci_pod_and_job_carry_the_gpu_spec_and_limit(tmp_path: Path, kind: str) -> None:
    document = written(tmp_path, *ECI_ARGS, "--kind", kind, "--gpus", "1", "--name", "tensorflow")
    assert document["kind"] == ("Pod" if kind == "pod" else "Job")
    template = pod_template(document)
    assert template["metadata"]["annotations"] == {"k8s.aliyun.com/eci-use-specs": "ecs.gn6i-c4g1.xlarge"}
    assert template["metadata"]["labels"]["alibabacloud.com/eci"] == "true"
    (container,) = template["spec"]["containers"]
    assert container["resources"] == {"limits": {"nvidia.com/gpu": "1"}}
    assert container["command"] == ["sh", "-c", "python models/tutorials/image/imagenet/classify_image.py"]
    assert container["volumeMounts"] == [{"name": "data", "mountPath": "/tmp/imagenet"}]
    assert template["spec"]["volumes"] == [{"name": "data", "persistentVolumeClaim": {"claimName": "nas-train"}}]
    assert template["spec"]["restartPolicy"] == "OnFailure"


def test_eks_gpu_type_alone_by_default_and_the_pinned_spec_with_cpu_and_memory(tmp_path: Path) -> None:
    plain = written(tmp_path, *EKS_ARGS, "--gpu-type", "T4,V100")
    assert plain["metadata"]["annotations"] == {"eks.tke.cloud.tencent.com/gpu-type": "T4,V100"}
    (container,) = plain["spec"]["containers"]
    assert container["resources"] == {"limits": {"nvidia.com/gpu": "1"}}  # limits only: the request follows
    assert container["env"] == [{"name": "MODEL_DIR", "value": "/tf/model"}]

    pinned = written(tmp_path, *EKS_ARGS, "--gpu-type", "T4", "--kind", "job", "--gpus", "2", "--cpu", "18",
                     "--memory", "80Gi")
    assert pinned["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "gpunode"}
    assert pod_template(pinned)["metadata"]["annotations"] == {
        "eks.tke.cloud.tencent.com/gpu-type": "T4", "eks.tke.cloud.tencent.com/cpu": "18",
        "eks.tke.cloud.tencent.com/mem": "80Gi", "eks.tke.cloud.tencent.com/gpu-count": "2"}


def base(cloud: str, **changes: object) -> GpuPod:
    values: dict = {"cloud": cloud, "image": "registry.example/train:1", "command": "python3 train.py", "gpus": 1,
                    "gpu_type": "ecs.gn7i-c8g1.2xlarge" if cloud == "eci" else "T4", "pvc": "data",
                    "mount_path": "/data"}
    return GpuPod(**{**values, **changes})  # type: ignore[arg-type]


# (cloud, changes, words of the rule, the fact whose page the refusal names)
REFUSALS = [
    ("eci", {"gpu_type": "ecs.gn6i-c4g1.xlarge,2-4Gi"}, "vCPU-memory specification", ECI["gpu_specs_alone"]),
    ("eci", {"gpu_type": "ecs.gn6i-c4g1.xlarge,ecs.c6.xlarge"}, "c6 is not a GPU family ECI runs",
     ECI["gpu_families"]),
    ("eci", {"gpu_type": ",".join(["ecs.gn6i-c4g1.xlarge"] * 6)}, "at most 5", ECI["specs_max"]),
    ("eci", {"gpu_type": "gn6i"}, "is not an ECS instance type", ECI["specs_annotation"]),
    ("eci", {"gpus": 0}, "nvidia.com/gpu limit", ECI["gpu_limit_required"]),
    ("eci", {"cpu": "8", "memory": "32Gi"}, "Tencent EKS annotations", ECI["gpu_specs_alone"]),
    ("tke-eks", {"gpu_type": "A100"}, "not a GPU model Tencent EKS documents", EKS["gpu_types"]),
    ("tke-eks", {"gpu_type": "T4,1/3*T4"}, "1/3*T4", EKS["gpu_types"]),
    ("tke-eks", {"cpu": "8"}, "--cpu and --memory go together", EKS["cpu_mem_together"]),
    ("tke-eks", {"memory": "32Gi"}, "--cpu and --memory go together", EKS["cpu_mem_together"]),
    ("tke-eks", {"cpu": "8", "memory": "32G"}, "must be in Gi", EKS["mem_annotation"]),
    ("tke-eks", {"gpus": 0}, "nvidia.com/gpu limit", EKS["limit_required"]),
]


@pytest.mark.parametrize(("cloud", "changes", "words", "fact"), REFUSALS)
def test_what_the_guides_forbid_is_refused_with_rule_and_page(cloud, changes, words, fact) -> None:
    with pytest.raises(Refused) as refused:
        base(cloud, **changes).manifest()
    assert words in str(refused.value)
    assert refused.value.fact is fact and str(fact.source) in str(refused.value)


def test_the_allowed_neighbours_of_the_refusals_pass() -> None:
    """Each refusal above is the rule, not a blanket: its nearest allowed form is written."""
    assert base("eci", gpu_type=",".join(["ecs.gn6i-c4g1.xlarge"] * 5)).manifest()
    assert base("eci", gpu_type="ecs.vgn7i-vws-m4.xlarge").manifest()
    assert base("tke-eks", gpu_type="1/4*T4").manifest()
    assert base("tke-eks", cpu="8", memory="32Gi").manifest()


def test_a_refusal_on_the_command_line_exits_2_with_rule_source_and_fix() -> None:
    result = run_cli("gpu-pod", *EKS_ARGS, "--gpu-type", "A100")
    assert result.code == 2, result.output
    assert "not a GPU model Tencent EKS documents" in result.output
    assert "https://cloud.tencent.com/document/product/457/44173" in result.output and "fix:" in result.output
    missing = run_cli("gpu-pod", "--cloud", "eci")
    assert missing.code == 2 and "--image, --command, --gpu-type, --pvc, --mount-path" in missing.output
    assert "--cloud eci --gpu-type ecs.gn6i-c4g1.xlarge" in missing.output  # the example is the cloud's own
    eks = run_cli("gpu-pod", "--cloud", "tke-eks", "--image", "i:1")
    assert eks.code == 2 and "--cloud tke-eks --gpu-type T4" in eks.output


def test_every_rule_the_writer_applies_is_in_a_registered_fact_table() -> None:
    assert TABLES["alibaba-eci"] is ECI and TABLES["tencent-eks"] is EKS


@pytest.mark.parametrize(("page", "table"), [("000-alibaba-eci.md", ECI), ("002-tencent-eks.md", EKS)])
def test_the_seed_page_lists_every_fact_with_its_source(page: str, table) -> None:
    text = (Path(__file__).resolve().parents[1] / "docs" / "seeds" / page).read_text()
    for key, fact in table.items():
        value = ", ".join(fact.value) if isinstance(fact.value, tuple) else fact.value
        assert f"| `{key}` | `{value}` | <{fact.source}> |" in text, (page, key)


def test_a_namespace_is_a_dns_label_and_a_long_name_says_its_limit() -> None:
    """Namespaces take no dots (Kubernetes' ValidateNamespaceName is NameIsDNSLabel): refused before kubectl is."""
    with pytest.raises(Refused, match="--namespace must be a DNS-1123 label"):
        base("eci", namespace="team.a").manifest()
    with pytest.raises(Refused, match="at most 63 characters"):
        base("eci", name="a" * 64).manifest()
    assert base("eci", namespace="team-a").manifest()["metadata"]["namespace"] == "team-a"


def test_a_lone_non_gpu_type_is_not_called_a_mix() -> None:
    """`--gpu-type ecs.c6.xlarge` alone names the GPU families; the mixing rule is said only when types are mixed."""
    with pytest.raises(Refused) as alone:
        base("eci", gpu_type="ecs.c6.xlarge").manifest()
    assert "c6 is not a GPU family ECI runs" in str(alone.value) and "mixed" not in str(alone.value)
    with pytest.raises(Refused, match="may not be mixed"):
        base("eci", gpu_type="ecs.gn6i-c4g1.xlarge,ecs.c6.xlarge").manifest()


def test_an_empty_eks_model_names_the_whole_value() -> None:
    """`--gpu-type T4,,V100` (a doubled comma) quotes the value the user typed, not an empty name."""
    with pytest.raises(Refused, match=r"--gpu-type 'T4,,V100' is not a GPU model"):
        base("tke-eks", gpu_type="T4,,V100").manifest()
