"""The node-pool seed pages (docs/seeds/001, 003) as their users walk them: every offline `gpunode` command of a page
runs as written, every file the page applies is accepted by its consumer (kubernetes-validate --strict; the TFJob
CRD schema and webhook rules), and the plan cases a page shows plan today as the page says."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

from tests.conftest import run_cli
from tests.kube_schemas import kubernetes_validate, tfjob_problems
from tests.plan_cases import find_case, problems, run_case

DOCS = Path(__file__).resolve().parent.parent / "docs" / "seeds"
PAGES = {"001": DOCS / "001-alibaba-helm-tf.md", "003": DOCS / "003-kubeflow-tfjob.md"}
OFFLINE = ("k8s-manifest", "nfs-volume")  # the commands that need no host: run as written


def blocks(page: Path, lang: str) -> list[str]:
    return re.findall(rf"^\s*```{lang}\n(.*?)^\s*```", page.read_text(), re.S | re.M)


def commands(page: Path) -> list[str]:
    return [line.strip() for block in blocks(page, "sh") for line in block.splitlines() if line.strip()]


def walk(page: Path, folder: Path) -> dict[str, list[dict]]:
    """Run the page's offline gpunode lines (`gpunode CMD ... > FILE`); return each applied file's documents."""
    written: dict[str, str] = {}
    applied: list[str] = []
    for line in commands(page):
        words = shlex.split(line)
        if words[:1] == ["gpunode"] and words[1] in OFFLINE:
            assert ">" in words, f"{page.name}: {line!r} writes no file"
            cut = words.index(">")
            result = run_cli(*words[1:cut])
            assert result.code == 0, f"{page.name}: {line}\n{result.output}"
            (folder / words[cut + 1]).write_text(result.stdout)
            written[words[cut + 1]] = result.stdout
        elif words[:2] == ["kubectl", "apply"]:
            applied.append(words[words.index("-f") + 1])
    assert applied and set(applied) <= set(written), f"{page.name} applies {applied}, writes {sorted(written)}"
    return {name: list(yaml.safe_load_all(written[name])) for name in applied}


def check_with_consumers(folder: Path, files: dict[str, list[dict]]) -> None:
    for name, documents in files.items():
        core = [d for d in documents if d["apiVersion"] != "kubeflow.org/v1"]
        if core:
            checked = kubernetes_validate(folder / name)
            assert checked.returncode == 0, f"{name}: {checked.stdout}{checked.stderr}"
            assert checked.stdout.count("passed") == len(core), checked.stdout
        for document in documents:
            if document["apiVersion"] == "kubeflow.org/v1":
                assert tfjob_problems(document) == [], name


def test_page_001_walk_the_nas_volume_by_label_and_the_device_plugin(tmp_path):
    files = walk(PAGES["001"], tmp_path)
    check_with_consumers(tmp_path, files)
    assert set(files) == {"nvidia-device-plugin.yml", "nas.yaml"}
    volume, _claim = files["nas.yaml"]
    values = yaml.safe_load(blocks(PAGES["001"], "yaml")[0])
    wanted = values["persistence"]["pvc"]["matchLabels"]
    assert wanted == {"train": "mnist"} and wanted.items() <= volume["metadata"]["labels"].items()
    assert volume["spec"]["nfs"]["path"] == "/data" == values["mountPath"]  # the guide's NAS folder and mount
    assert volume["spec"]["capacity"]["storage"] == values["persistence"]["pvc"]["storage"]
    assert volume["spec"]["accessModes"] == ["ReadWriteMany"]  # 2 workers and 2 ps mount it at once


@pytest.mark.parametrize(("kind", "name"), [("nvidia_driver", "ack-alinux3-cloud-driver"),
                                            ("container_toolkit", "ack-alinux3-cloud-toolkit"),
                                            ("docker", "ack-alinux3-kubernetes-auto"),
                                            ("docker", "tke-tencentos3-kubernetes-auto"),
                                            ("nvidia_driver", "tke-tencentos3-cloud-driver")])
def test_the_plans_of_cloud_node_pools_are_todays(kind, name):
    case = find_case(kind, name)
    assert problems(case, run_case(case)) == []


def test_every_plan_case_a_page_names_exists_and_plans_as_it_says():
    named = {m for page in PAGES.values() for m in re.findall(r"`(\w+)/([\w-]+)`", page.read_text())
             if (Path(__file__).parent / "plans" / f"{m[0]}.yaml").exists()}
    assert len(named) == 3  # the ACK node's driver, toolkit and Docker plans (page 001)
    for kind, name in named:
        case = find_case(kind, name)
        assert problems(case, run_case(case)) == []


def test_page_003_walk_the_tfjob_mounts_the_claim_nfs_volume_wrote(tmp_path):
    files = walk(PAGES["003"], tmp_path)
    check_with_consumers(tmp_path, files)
    _volume, claim = files["nas-dist-pv.yaml"]
    (job,) = files["mnist-simple-gpu-dist.yaml"]
    assert job["metadata"]["namespace"] == claim["metadata"]["namespace"]
    roles = job["spec"]["tfReplicaSpecs"]
    assert set(roles) == {"Chief", "Worker", "PS"}  # the guide's MASTER, WORKER, PS
    for role, spec in roles.items():
        pod = spec["template"]["spec"]
        claims = {v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"]}
        assert claims == {claim["metadata"]["name"]}, role
        (container,) = pod["containers"]
        assert container["volumeMounts"][0]["mountPath"] == "/training"
        assert {"name": "TEST_TMPDIR", "value": "/training"} in container["env"]
        gpus = container.get("resources", {}).get("limits", {}).get("nvidia.com/gpu", 0)
        assert gpus == (0 if role == "PS" else 1), role
        assert container["image"].endswith(":cpu" if role == "PS" else ":gpu")


def test_the_crd_check_refuses_what_the_api_server_would(tmp_path):
    """The consumer is not a rubber stamp: a misspelt field, a wrong type, a container the webhook wants named."""
    (job,) = yaml.safe_load_all(run_cli("k8s-manifest", "tfjob", "--name", "m", "--image", "i:gpu", "--claim",
                                        "data").stdout)
    assert tfjob_problems(job) == []
    typo = yaml.safe_load(yaml.safe_dump(job))
    typo["spec"]["tfReplicaSpecs"]["Worker"]["replica"] = 2
    assert any("replica" in p for p in tfjob_problems(typo))
    wrong = yaml.safe_load(yaml.safe_dump(job))
    wrong["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] = "two"
    assert any("'two' is not of type 'integer'" in p for p in tfjob_problems(wrong))
    renamed = yaml.safe_load(yaml.safe_dump(job))
    renamed["spec"]["tfReplicaSpecs"]["PS"]["template"]["spec"]["containers"][0]["name"] = "tf"
    assert "PS: must have at least one container with name tensorflow" in tfjob_problems(renamed)
    old = {"apiVersion": "kubeflow.org/v1alpha1", "kind": "TFJob", "metadata": {"name": "x"},
           "spec": {"replicaSpecs": [{"replicas": 1, "tfReplicaType": "MASTER"}]}}  # the guide's 2018 form
    assert tfjob_problems(old)


def test_tfjob_refuses_what_the_api_server_and_the_webhook_would_refuse(tmp_path):
    """A new user's wrong values: the webhook's DNS-1035 job name, a namespace with a dot, an unclosed quote in
    --command are exit 2 with the fix (never an internal error); a claim with a dot is a legal claim name, so the
    volume that mounts it gets a DNS-label name of its own."""
    common = ("k8s-manifest", "tfjob", "--image", "i:gpu", "--claim", "data")
    for args, words in ((("--name", "1job"), "DNS-1035 label"), (("--name", "my.job"), "DNS-1035 label"),
                        (("--name", "m", "--namespace", "team.a"), "not a namespace name"),
                        (("--name", "m", "--command", 'python "x'), "No closing quotation")):
        result = run_cli(*common, *args)
        assert result.code == 2 and words in result.output and "fix:" in result.output, result.output
        assert "internal error" not in result.output
    (job,) = yaml.safe_load_all(run_cli("k8s-manifest", "tfjob", "--name", "m", "--image", "i:gpu", "--claim",
                                        "nas.train").stdout)
    assert tfjob_problems(job) == []
    for spec in job["spec"]["tfReplicaSpecs"].values():
        pod = spec["template"]["spec"]
        assert pod["volumes"] == [{"name": "data", "persistentVolumeClaim": {"claimName": "nas.train"}}]
        assert pod["containers"][0]["volumeMounts"][0]["name"] == "data"
    renamed = yaml.safe_load(yaml.safe_dump(job))
    renamed["metadata"]["name"] = "my.job"
    assert any("DNS-1035" in p for p in tfjob_problems(renamed))


def test_device_plugin_yaml_has_no_anchors():
    """The DaemonSet reads as NVIDIA's file does: the selector's and the template's labels written out, no &id001."""
    text = run_cli("k8s-manifest", "device-plugin").stdout
    assert "&id" not in text and "*id" not in text
    (daemonset,) = yaml.safe_load_all(text)
    assert daemonset["spec"]["selector"]["matchLabels"] == daemonset["spec"]["template"]["metadata"]["labels"]


def test_own_nodes_are_told_to_make_nvidia_containerds_default_runtime():
    """New-user trial: the static device plugin names no RuntimeClass and NVIDIA's README wants nvidia as the default
    low-level runtime, which gpu-node does not make by default; both pages say which variable does, and it exists."""
    book = yaml.safe_load((Path(__file__).resolve().parent.parent / "gpunode" / "_playbooks" / "gpu-node.yml")
                          .read_text())
    assert book["vars"]["containerd_default_runtime"] is False  # gpunode's default: add nvidia, keep runc default
    for page in PAGES.values():
        assert "--var containerd_default_runtime=true" in page.read_text(), page.name
    (daemonset,) = yaml.safe_load_all(run_cli("k8s-manifest", "device-plugin").stdout)
    assert "runtimeClassName" not in daemonset["spec"]["template"]["spec"]
