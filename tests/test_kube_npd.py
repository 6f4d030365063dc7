"""The Kubernetes form of node acceptance: node-problem-detector's custom plugin monitor running the node's
`accept --tier quick --format npd`. The objects pass kubernetes-validate --strict; the monitor config passes the
validator written from NPD's config types (gpunode/kube_npd.py cites each line), which accepts NPD's own example
and refuses what NPD's Validate refuses (config.go@6632ca67:139-182)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from gpunode.kube_npd import ACCEPT_PROGRAM, CONDITION, accept_config, config_problems, go_duration, npd_objects
from tests.conftest import run_cli
from tests.kube_schemas import kubernetes_validate

NPD_EXAMPLE = Path(__file__).parent / "data" / "npd" / "custom-plugin-monitor.json"


def test_the_manifest_passes_kubernetes_validate_strictly(tmp_path):
    result = run_cli("k8s-manifest", "accept-npd")
    assert result.code == 0, result.output
    path = tmp_path / "npd.yaml"
    path.write_text(result.stdout)
    checked = kubernetes_validate(path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    kinds = [doc["kind"] for doc in yaml.safe_load_all(result.stdout) if doc]
    assert kinds == ["ServiceAccount", "ClusterRoleBinding", "ConfigMap", "DaemonSet"]
    assert checked.stdout.count("passed") == len(kinds)


def test_the_configmap_holds_the_config_the_daemonset_names():
    docs = [d for d in yaml.safe_load_all(run_cli("k8s-manifest", "accept-npd").stdout) if d]
    config_map = next(d for d in docs if d["kind"] == "ConfigMap")
    daemon_set = next(d for d in docs if d["kind"] == "DaemonSet")
    (name, text), = config_map["data"].items()
    config = json.loads(text)
    assert config_problems(config) == []
    pod = daemon_set["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert f"--config.custom-plugin-monitor=/config/{name}" in container["command"]
    volume = next(v for v in pod["volumes"] if v["name"] == "config")
    assert volume["configMap"]["name"] == config_map["metadata"]["name"]
    assert {"name": "config", "mountPath": "/config", "readOnly": True} in container["volumeMounts"]
    # the plugin runs the host's program in the host's mount namespace: PID 1 must be the host's
    assert pod["hostPID"] is True and container["securityContext"]["privileged"] is True
    rule, = config["rules"]
    assert rule["path"] == "/usr/bin/nsenter"
    assert rule["args"][rule["args"].index("--") + 1:] == [ACCEPT_PROGRAM, "--tier", "quick", "--format", "npd"]
    assert rule["type"] == "permanent" and rule["condition"] == CONDITION
    assert [c["type"] for c in config["conditions"]] == [CONDITION]


def test_npds_own_example_passes_the_validator():
    example = json.loads(NPD_EXAMPLE.read_text())
    assert config_problems(example, strict=False) == []
    assert config_problems(example) == [  # gpunode's own rule: NPD resolves ./config/... against its working folder
        "rules[0].path: an absolute path to the plugin (a relative one is NPD's working folder's)",
        "rules[1].path: an absolute path to the plugin (a relative one is NPD's working folder's)"]


def _broken(change) -> list[str]:
    config = copy.deepcopy(accept_config())
    change(config)
    return config_problems(config)


@pytest.mark.parametrize("change, expected", [
    (lambda c: c.update(plugin="kmsg"), "NPD supports only \"custom\""),
    (lambda c: c["pluginConfig"].update(invoke_interval="0s"), "invoke_interval: must be greater than zero"),
    (lambda c: c["pluginConfig"].update(timeout="2 minutes"), "is not a Go duration"),
    (lambda c: c["pluginConfig"].update(concurrency=0), "no plugin ever runs"),
    (lambda c: c["pluginConfig"].update(invoke_intervall="1m"), "pluginConfig.invoke_intervall: not a field"),
    (lambda c: c["rules"][0].update(timeout="5m"), "longer than pluginConfig.timeout"),
    (lambda c: c["rules"][0].update(condition="GPUProblem"), "has no default condition"),
    (lambda c: c["rules"][0].update(type="perm"), "neither temporary nor permanent"),
    (lambda c: c["rules"][0].update(path="accept"), "an absolute path"),
    (lambda c: c["rules"][0].update(args="--tier quick"), "a list of strings"),
    (lambda c: c["conditions"][0].update(status="Bad"), "one of True, False, Unknown"),
    (lambda c: c.update(rules=[]), "at least one rule"),
    (lambda c: c.pop("source"), "source: the monitor's name"),
])
def test_the_validator_refuses_what_npd_refuses_or_ignores(change, expected):
    problems = _broken(change)
    assert any(expected in p for p in problems), problems


@pytest.mark.parametrize("text, seconds", [
    ("300ms", 0.3), ("-1.5h", -5400.0), ("2h45m", 9900.0), ("0", 0.0), ("1.5s", 1.5), ("10m", 600.0),
])
def test_go_durations_as_the_go_doc_examples(text, seconds):
    # https://pkg.go.dev/time#ParseDuration: "300ms", "-1.5h" or "2h45m"
    assert go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "10", "1d", "m", "1 s", "1.5.s"])
def test_go_duration_refuses_what_go_refuses(text):
    assert go_duration(text) is None


def test_bad_options_exit_2_with_the_fix():
    result = run_cli("k8s-manifest", "accept-npd", "--timeout", "forever")
    assert result.code == 2
    assert "not a Go duration" in result.output and "--interval 10m --timeout 120s" in result.output


def test_the_objects_are_built_from_npds_deployment():
    daemon_set = npd_objects()[-1]
    container = daemon_set["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "registry.k8s.io/node-problem-detector/node-problem-detector:v0.8.19"
    assert container["resources"]["limits"] == {"cpu": "10m", "memory": "80Mi"}
