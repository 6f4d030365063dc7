"""GPU node pools (issue 36, seeds 001 and 003): cloud-installed GPU stacks kept, no Docker beside a cluster's
containerd, Docker's maintained repository only, NVIDIA's device plugin manifest, and the smaller facts re-sourced."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpunode.commands.kube_cmd import DEVICE_PLUGIN_PIN, device_plugin
from gpunode.distros import for_os
from gpunode.distros.base import UnsupportedDistro
from gpunode.distros.repos import DOCKER
from gpunode.distros.ubuntu import UBUNTU
from gpunode.steps import build_step
from gpunode.steps.kube_node import KUBE_NODE, parse
from gpunode.vendor_facts import value
from tests.conftest import run_cli
from tests.kube_schemas import kubernetes_validate
from tests.plan_cases import build_facts, context, find_case, run_case

ROOT = Path(__file__).resolve().parent.parent
STATIC_MANIFEST = ROOT / "tests" / "data" / "k8s-device-plugin" / "nvidia-device-plugin.yml"  # SOURCES.md beside it


def test_the_device_plugin_passes_the_kubernetes_schemas_strictly(tmp_path):
    result = run_cli("k8s-manifest", "device-plugin")
    assert result.code == 0, result.output
    (tmp_path / "dp.yml").write_text(result.stdout)
    checked = kubernetes_validate(tmp_path / "dp.yml")
    assert checked.returncode == 0 and "daemonset/nvidia-device-plugin-daemonset" in checked.stdout, checked.stdout
    (daemonset,) = yaml.safe_load_all(result.stdout)
    pod = daemonset["spec"]["template"]["spec"]
    assert pod["containers"][0]["image"] == "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"
    # kubelet's device plugin folder: where the plugin's socket (the kube_node evidence) appears
    assert pod["volumes"][0]["hostPath"]["path"] + "/nvidia-gpu.sock" == value(KUBE_NODE, "plugin_socket")


def test_the_device_plugin_is_nvidias_static_manifest_of_the_pinned_release():
    sources = STATIC_MANIFEST.with_name("SOURCES.md").read_text()
    assert DEVICE_PLUGIN_PIN.ref in sources  # the copy is of the pinned commit
    assert device_plugin() == list(yaml.safe_load_all(STATIC_MANIFEST.read_text()))


def test_a_tke_tencentos4_node_needs_no_driver_packages_to_be_planned():
    """TencentOS 4 without dkms refuses NVIDIA's packages (tencentos4-fresh); its TKE node, whose driver the cloud
    installed, is verified only. A distro gpunode installs no driver on (Amazon Linux 2) is still probed for it."""
    case = find_case("nvidia_driver", "tke-tencentos3-cloud-driver")
    step = build_step("nvidia_driver", {"branch": 550})
    assert "kube_node" in step.probe(build_facts("tencentos-4", case["facts"]))
    assert set(step.probe(build_facts("amzn-2", case["facts"]))) == {"kube_node"}
    assert [a["summary"] for a in run_case({**case, "os": "amzn-2"})["actions"]] == [
        "verify only: the NVIDIA driver the cloud installed"]
    kept = run_case({**case, "os": "tencentos-4"})
    assert [a["summary"] for a in kept["actions"]] == ["verify only: the NVIDIA driver the cloud installed"]
    refused = find_case("nvidia_driver", "tencentos4-fresh")
    assert "error" in run_case(refused)  # a plain TencentOS 4 host: refused as before


def test_cloud_driver_replace_plans_gpunodes_own_driver():
    case = find_case("nvidia_driver", "ack-alinux3-cloud-driver")
    replaced = run_case({**case, "args": {**case["args"], "cloud_driver": "replace"}})
    assert not any(a["summary"].startswith("verify only") for a in replaced.get("actions", []))
    assert any("install" in a["summary"] for a in replaced["actions"])


def test_kube_node_markers():
    node = parse("kubelet /usr/bin/kubelet\nkubelet /usr/bin/kubelet\nsocket /var/lib/kubelet/device-plugins/"
                 "nvidia-gpu.sock\nnoise\n")
    assert node.kubelet == ("/usr/bin/kubelet",) and node.is_kubernetes and len(node.device_plugin) == 1
    assert not parse("").is_kubernetes


def test_the_gpu_node_playbook_decides_docker_from_facts():
    text = (ROOT / "playbooks" / "gpu-node.yml").read_text()
    variables = yaml.safe_load(text)["vars"]
    assert variables["install_docker"] == "auto" and variables["cloud_driver"] == "keep"
    steps = {s["name"]: s for s in yaml.safe_load(text)["steps"]}
    assert steps["Docker"]["docker"] == {"install": "{{ install_docker }}"}
    assert steps["NVIDIA driver"]["nvidia_driver"]["cloud_driver"] == "{{ cloud_driver }}"


def test_no_daemon_json_when_the_docker_step_installed_no_engine():
    case = {"name": "x", "kind": "container_runtime", "os": "alinux-3", "args": {"containerd": "no"},
            "shared": {"docker_left_out": True}, "probe": {"daemon": "absent\n"}}
    ctx = context(case)
    step = build_step("container_runtime", {"containerd": "no"})
    assert step.plan(ctx) == [] and "left alone" in ctx.notes[0]
    ctx = context({**case, "shared": {}})
    assert [a.summary for a in step.plan(ctx)] == ["create /etc/docker/daemon.json"]


def test_docker_repositories_are_the_ones_docker_maintains():
    assert value(DOCKER, "rhel_maintained") == (8, 9, 10)
    assert "centos_repo_base" not in DOCKER  # Docker's CentOS tree has no maintained el8
    facts = build_facts("tencentos-3", {})
    path, content = for_os(facts.os).docker_repo_file()
    assert "baseurl=https://download.docker.com/linux/rhel/8/$basearch/stable" in content
    rocky = for_os(build_facts("rocky-9", {}).os)
    rocky.os = type(rocky.os)(**{**rocky.os.__dict__, "version_major": 7})
    with pytest.raises(UnsupportedDistro, match="Docker maintains no repository for EL 7"):
        rocky.docker_repo_file()


def test_canonicals_dkms_template_caps_the_jobs_at_16():
    fact = UBUNTU["dkms_make_jobs"]
    assert "at most 16" in fact.value and fact.source.line == "6-9"
    assert "Canonical's dkms.conf builds with `nproc` capped at 16" in (ROOT / "docs" / "gpu-node.md").read_text()


def test_validate_only_help_says_packer_init_downloads():
    help_text = run_cli("build-ami", "--help").stdout
    assert "packer init" in help_text and "downloads" in help_text
    assert "offline, no credentials" not in help_text


def test_install_docker_takes_auto_true_false_and_refuses_the_rest_before_connecting():
    result = run_cli("provision", "-H", "192.0.2.1", "--playbook", "gpu-node", "--var", "install_docker=maybe")
    assert result.code == 2, result.output
    assert "gpu-node.yml:" in result.stderr and "docker.install must be one of auto, yes, no, got 'maybe'" in \
        result.stderr
    assert "the playbook's default: install_docker=auto" in result.stderr
