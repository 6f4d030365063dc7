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


@pytest.mark.parametrize("extra", [(), ("--node-selector", "nvidia.com/gpu.present=true", "--interval", "1h")])
def test_the_manifest_passes_kubernetes_validate_strictly(tmp_path, extra):
    result = run_cli("k8s-manifest", "accept-npd", *extra)
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
    assert "not a Go duration" in result.output and "10m, 120s" in result.output
    result = run_cli("k8s-manifest", "accept-npd", "--node-selector", "bad key=x")
    assert result.code == 2 and "node selector bad key=x is not a Kubernetes label" in result.output


def test_a_timeout_shorter_than_the_tier_budget_is_refused():
    """NPD kills a plugin at its timeout and reads it as Unknown (plugin.go run(), cited in kube_npd.py): a timeout
    under the quick tier's 60 s budget would leave the condition Unknown on every healthy node."""
    from gpunode.accept.node import DEFAULT_BUDGET
    from gpunode.kube_npd import TIER_BUDGET_S

    assert TIER_BUDGET_S == DEFAULT_BUDGET  # one budget per tier, here and in the runner's controller side
    for short in ("30s", "0s", "59s"):
        result = run_cli("k8s-manifest", "accept-npd", "--timeout", short)
        assert result.code == 2, result.output
        assert f"--timeout {short} is shorter than the quick tier's 60 s budget" in result.output
    assert run_cli("k8s-manifest", "accept-npd", "--timeout", "2m").code == 0


def test_the_objects_are_built_from_npds_deployment():
    daemon_set = npd_objects()[-1]
    container = daemon_set["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "registry.k8s.io/node-problem-detector/node-problem-detector:v0.8.19"
    assert container["resources"]["limits"] == {"cpu": "10m", "memory": "80Mi"}


# ---- NPD's own code as the consumer ------------------------------------------------------------------------------
# With Go installed and a clone of kubernetes/node-problem-detector named by GPUNODE_NPD_SOURCE (a git folder), NPD's
# config types at the pinned commit are built with tests/npd_check/main.go, which loads a config as NPD's custom
# plugin monitor does (json.Unmarshal, ApplyConfiguration, Validate).
NPD_COMMIT = "6632ca67148f7a23df9cdbd98d9e89b388561a3a"
NPD_FILES = ("pkg/types/types.go", "pkg/custompluginmonitor/types/config.go",
             "pkg/custompluginmonitor/types/types.go")


@pytest.fixture(scope="module")
def npd_check(tmp_path_factory):
    import os
    import shutil
    import subprocess

    source = os.environ.get("GPUNODE_NPD_SOURCE", "")
    if not shutil.which("go") or not source:
        pytest.skip("needs Go and GPUNODE_NPD_SOURCE (a node-problem-detector git clone)")
    build = tmp_path_factory.mktemp("npd")

    def show(path: str) -> bytes:
        return subprocess.run(["git", "-C", source, "show", f"{NPD_COMMIT}:{path}"], capture_output=True,
                              check=True).stdout

    listing = subprocess.run(["git", "-C", source, "ls-tree", "-r", "--name-only", NPD_COMMIT,
                              "vendor/github.com/spf13/pflag"], capture_output=True, text=True, check=True).stdout
    for path in (*NPD_FILES, *listing.split()):
        (build / path).parent.mkdir(parents=True, exist_ok=True)
        (build / path).write_bytes(show(path))
    (build / "cmd/check").mkdir(parents=True)
    shutil.copy(Path(__file__).parent / "npd_check" / "main.go", build / "cmd/check/main.go")
    (build / "go.mod").write_text("module k8s.io/node-problem-detector\n\ngo 1.19\n\n"
                                  "require github.com/spf13/pflag v1.0.10\n")
    (build / "vendor/modules.txt").write_text("# github.com/spf13/pflag v1.0.10\n## explicit; go 1.12\n"
                                              "github.com/spf13/pflag\n")
    env = {**os.environ, "GOFLAGS": "-mod=vendor", "GOPROXY": "off", "GOTOOLCHAIN": "local",
           "GOCACHE": str(build / ".cache")}
    subprocess.run(["go", "build", "-o", "check", "./cmd/check"], cwd=build, env=env, check=True, timeout=600)

    def check(config: dict, tmp: Path) -> subprocess.CompletedProcess[str]:
        path = tmp / "config.json"
        path.write_text(json.dumps(config))
        return subprocess.run([str(build / "check"), str(path)], capture_output=True, text=True)

    return check


@pytest.mark.extended  # opt-in: Go and an NPD clone are not on CI's machine (no internet but PyPI and Debian)
def test_npds_own_loader_accepts_gpunodes_config(npd_check, tmp_path):
    result = npd_check(accept_config(), tmp_path)
    assert result.returncode == 0, result.stdout  # Validate also stats the rule's path: /usr/bin/nsenter
    assert result.stdout.startswith("ok interval=10m0s timeout=2m0s rules=1 concurrency=1")


@pytest.mark.extended
@pytest.mark.parametrize("change, npd_refuses", [
    (lambda c: c.update(plugin="kmsg"), True),
    (lambda c: c["pluginConfig"].update(invoke_interval="0s"), True),
    (lambda c: c["pluginConfig"].update(timeout="2 minutes"), True),
    (lambda c: c["rules"][0].update(timeout="5m"), True),
    (lambda c: c["rules"][0].update(condition="GPUProblem"), True),
    # what NPD loads without a word, and then never does what was meant: the validator refuses these too
    (lambda c: c["pluginConfig"].update(invoke_intervall="1m"), False),
    (lambda c: c["pluginConfig"].update(concurrency=0), False),
    (lambda c: c["rules"][0].update(type="perm"), False),
])
def test_the_validator_agrees_with_npd_and_is_stricter_only_where_npd_is_silent(npd_check, tmp_path, change,
                                                                                  npd_refuses):
    config = copy.deepcopy(accept_config())
    change(config)
    assert config_problems(config), "the validator must refuse it"
    assert (npd_check(config, tmp_path).returncode != 0) is npd_refuses
