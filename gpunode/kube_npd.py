"""The Kubernetes form of node acceptance: node-problem-detector (NPD) running the node's own acceptance program as a
custom plugin, so a node that fails the quick tier carries the condition `GPUAcceptanceProblem=True` that the
cluster can act on (a taint controller, an alert, a scheduler filter).

Why NPD and not GPU Feature Discovery labels (docs/kube-acceptance.md has the long form): GFD's labels describe what
a node *has* (model, memory, MIG strategy), published by NVIDIA's own code; they carry no health verdict and GFD
runs no external program. NPD's custom plugin monitor exists to run a node program and turn its exit status (0 OK,
1 NonOK, 2 Unknown) into a node condition, which is exactly `accept --format npd`'s protocol.

Every field below comes from NPD's source at the pinned commit: the config types (pkg/custompluginmonitor/types/
config.go, types.go; pkg/types/types.go), the example config/custom-plugin-monitor.json and the DaemonSet of
deployment/node-problem-detector.yaml. `config_problems` checks a config the way NPD's loader would read it
(json.Unmarshal, ApplyConfiguration, Validate) plus what would load but silently never work (unknown keys, which
Go's decoder ignores; concurrency 0, which blocks every plugin).
"""

from __future__ import annotations

import json
import re
from typing import Any

from gpunode.vendor_facts import Fact, Pin, Source, fact_table, value

NPD_PIN = Pin("kubernetes/node-problem-detector", "6632ca67148f7a23df9cdbd98d9e89b388561a3a")
_CONFIG_GO = "pkg/custompluginmonitor/types/config.go"
_TYPES_GO = "pkg/custompluginmonitor/types/types.go"
_PKG_TYPES = "pkg/types/types.go"
_EXAMPLE = "config/custom-plugin-monitor.json"
_DEPLOY = "deployment/node-problem-detector.yaml"

NPD = fact_table("node-problem-detector", {
    "image": Fact("registry.k8s.io/node-problem-detector/node-problem-detector:v0.8.19", NPD_PIN.at(_DEPLOY, "32"),
                  "the image NPD's own DaemonSet runs at the pinned commit"),
    "plugin": Fact("custom", NPD_PIN.at(_CONFIG_GO, "141-143"),
                   "the only plugin NPD supports: Validate refuses any other (customPluginName, line 38)"),
    "global_keys": Fact(("invoke_interval", "timeout", "max_output_length", "concurrency",
                         "enable_message_change_based_condition_update", "skip_initial_status"),
                        NPD_PIN.at(_CONFIG_GO, "41-58"), "pluginGlobalConfig's JSON tags"),
    "top_keys": Fact(("plugin", "pluginConfig", "source", "conditions", "rules", "metricsReporting"),
                     NPD_PIN.at(_CONFIG_GO, "60-75"), "CustomPluginConfig's JSON tags"),
    "rule_keys": Fact(("type", "condition", "reason", "path", "args", "timeout", "invoke_interval"),
                      NPD_PIN.at(_TYPES_GO, "40-62"), "CustomRule's JSON tags"),
    "condition_keys": Fact(("type", "status", "transition", "reason", "message"), NPD_PIN.at(_PKG_TYPES, "55-68"),
                           "Condition's JSON tags (a default condition)"),
    "rule_types": Fact(("temporary", "permanent"), NPD_PIN.at(_PKG_TYPES, "94-102"),
                       "temporary: an event only; permanent: the node condition changes"),
    "condition_statuses": Fact(("True", "False", "Unknown"), NPD_PIN.at(_PKG_TYPES, "43-53"), "ConditionStatus"),
    "exit_codes": Fact({0: "OK", 1: "NonOK", 2: "Unknown"}, NPD_PIN.at(_TYPES_GO, "25-31"),
                       "the plugin's exit status; any other code reads as Unknown (plugin/plugin.go:340-350)"),
    "defaults": Fact({"timeout": "5s", "invoke_interval": "30s", "max_output_length": 80, "concurrency": 3},
                     NPD_PIN.at(_CONFIG_GO, "27-36"), "what NPD uses for a missing pluginConfig key"),
    "config_flag": Fact("--config.custom-plugin-monitor", NPD_PIN.at("cmd/options/options.go", "150"),
                        "flags are config.<problem daemon name>; the name is custom-plugin-monitor "
                        "(pkg/custompluginmonitor/custom_plugin_monitor.go:35)"),
    "nsenter": Fact("/usr/bin/nsenter", NPD_PIN.at("Dockerfile", "23-25"),
                    "the image is Kubernetes' build-image base with util-linux installed, whose package ships "
                    "/usr/bin/nsenter (dpkg -S bin/nsenter on the same Debian release: util-linux)"),
    "service_account": Fact("node-problem-detector", NPD_PIN.at("deployment/rbac.yaml", "1-19"),
                            "the ServiceAccount bound to ClusterRole system:node-problem-detector (npd-binding)"),
})

# the tiers' default budgets (scripts/accept_node.py DEFAULT_BUDGET; gpunode/accept/node.py keeps the same). NPD
# kills a plugin at its timeout and a killed plugin reads Unknown: kubernetes/node-problem-detector@011b9e6a46f4b87d4
# 0112a1ce772c907c48e3511:pkg/custompluginmonitor/plugin/plugin.go, func run (context.WithTimeout of the rule's or
# the global timeout; util.Kill(cmd) at ctx.Done; the exit status's `default:` case returns cpmtypes.Unknown). So the
# timeout must give the tier at least its budget.
TIER_BUDGET_S = {"quick": 60.0, "standard": 1200.0, "burn-in": 10800.0}
ACCEPT_PROGRAM = "/usr/local/libexec/gpunode/accept"  # installed on the node by the acceptance helper's step
CONDITION = "GPUAcceptanceProblem"  # NPD's naming: a condition that is True when the problem is present (NTPProblem)
SOURCE_NAME = "gpunode-accept"
NAMESPACE = "kube-system"
CONFIG_NAME = "gpunode-accept-monitor.json"

# Go's time.ParseDuration: [-+]?([0-9]*(\.[0-9]*)?[a-z]+)+ with units ns us µs ms s m h, or "0"
# (https://pkg.go.dev/time#ParseDuration; go/src/time/format.go ParseDuration)
_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
GO_DURATION = Source(url="https://pkg.go.dev/time#ParseDuration")


def go_duration(text: str) -> float | None:
    """Seconds of a Go duration string, or None when time.ParseDuration would refuse it."""
    if not isinstance(text, str):
        return None
    sign, body = (-1.0, text[1:]) if text[:1] == "-" else (1.0, text.removeprefix("+"))
    if body == "0":
        return 0.0
    if not body:
        return None
    pos, total = 0, 0.0
    while pos < len(body):
        match = _DURATION_PART.match(body, pos)
        if not match:
            return None
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    return sign * total


def _unknown(where: str, obj: dict[str, Any], allowed: tuple[str, ...]) -> list[str]:
    return [f"{where}{key}: not a field NPD reads (Go's json.Unmarshal drops it silently); fields: "
            f"{', '.join(allowed)}" for key in obj if key not in allowed]


def _global_problems(glob: Any) -> tuple[list[str], float | None]:
    if not isinstance(glob, dict):
        return ["pluginConfig: must be an object"], None
    found = _unknown("pluginConfig.", glob, value(NPD, "global_keys"))
    defaults = value(NPD, "defaults")
    seconds: dict[str, float | None] = {}
    for key in ("timeout", "invoke_interval"):
        seconds[key] = go_duration(glob.get(key, defaults[key]))
        if seconds[key] is None:
            found.append(f"pluginConfig.{key}: {glob.get(key)!r} is not a Go duration (e.g. 30s, 5m)")
    if (seconds["invoke_interval"] or 0) <= 0 and seconds["invoke_interval"] is not None:
        found.append("pluginConfig.invoke_interval: must be greater than zero (config.go:144-146)")
    for key in ("max_output_length", "concurrency"):
        number = glob.get(key, defaults[key])
        if not isinstance(number, int) or isinstance(number, bool) or number < 1:
            found.append(f"pluginConfig.{key}: must be a whole number of at least 1, got {number!r}"
                         + (" (0 makes plugin.go:60's semaphore unbuffered: no plugin ever runs)"
                            if key == "concurrency" else ""))
    for key in ("enable_message_change_based_condition_update", "skip_initial_status"):
        if key in glob and not isinstance(glob[key], bool):
            found.append(f"pluginConfig.{key}: must be true or false")
    return found, seconds["timeout"]


def _condition_problems(conditions: Any) -> tuple[list[str], set[str]]:
    if not isinstance(conditions, list):
        return ["conditions: must be a list"], set()
    found, names = [], set()
    for i, cond in enumerate(conditions):
        if not isinstance(cond, dict):
            found.append(f"conditions[{i}]: must be an object")
            continue
        found += _unknown(f"conditions[{i}].", cond, value(NPD, "condition_keys"))
        if not cond.get("type") or not isinstance(cond.get("type"), str):
            found.append(f"conditions[{i}].type: a condition needs a type")
        names.add(str(cond.get("type")))
        if "status" in cond and cond["status"] not in value(NPD, "condition_statuses"):
            found.append(f"conditions[{i}].status: one of True, False, Unknown")
    return found, names


def _rule_problems(i: int, rule: Any, global_timeout: float | None, conditions: set[str],
                   strict: bool) -> list[str]:
    where = f"rules[{i}]"
    if not isinstance(rule, dict):
        return [f"{where}: must be an object"]
    found = _unknown(f"{where}.", rule, value(NPD, "rule_keys"))
    if rule.get("type") not in value(NPD, "rule_types"):
        found.append(f"{where}.type: {rule.get('type')!r} is neither temporary nor permanent")
    if rule.get("type") == "permanent" and rule.get("condition") not in conditions:
        found.append(f"{where}.condition: permanent problem {rule.get('condition')!r} has no default condition "
                     "in `conditions` (config.go:164-179)")
    path = rule.get("path")
    if not isinstance(path, str) or not path:
        found.append(f"{where}.path: the plugin's path")
    elif strict and not path.startswith("/"):
        found.append(f"{where}.path: an absolute path to the plugin (a relative one is NPD's working folder's)")
    args = rule.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        found.append(f"{where}.args: a list of strings")
    if not isinstance(rule.get("reason"), str) or not rule.get("reason"):
        found.append(f"{where}.reason: a rule needs a reason")
    return found + _rule_time_problems(where, rule, global_timeout)


def _rule_time_problems(where: str, rule: dict[str, Any], global_timeout: float | None) -> list[str]:
    """A rule's own timeout and interval: Go durations, the timeout within the global one (config.go:149-155)."""
    found = [f"{where}.{key}: {rule[key]!r} is not a Go duration"
             for key in ("timeout", "invoke_interval") if key in rule and go_duration(rule[key]) is None]
    timeout = go_duration(rule.get("timeout", "0"))
    if timeout is not None and global_timeout is not None and timeout > global_timeout:
        found.append(f"{where}.timeout: {rule['timeout']} is longer than pluginConfig.timeout (config.go:152-155)")
    interval = go_duration(rule.get("invoke_interval", "1s"))
    if interval is not None and interval <= 0:
        found.append(f"{where}.invoke_interval: must be greater than zero (config.go:149-151)")
    return found


def config_problems(config: Any, strict: bool = True) -> list[str]:
    """What NPD's custom plugin monitor would refuse in `config`, or silently ignore; [] when it is sound. `strict`
    adds gpunode's own rule (absolute plugin paths). Path existence (config.go:158-162) is checked inside NPD's
    container and cannot be checked here."""
    if not isinstance(config, dict):
        return ["the config must be a JSON object"]
    found = _unknown("", config, value(NPD, "top_keys"))
    if config.get("plugin") != value(NPD, "plugin"):
        found.append(f"plugin: {config.get('plugin')!r}: NPD supports only \"custom\" (config.go:141-143)")
    if not isinstance(config.get("source"), str) or not config.get("source"):
        found.append("source: the monitor's name (events and conditions carry it)")
    if "metricsReporting" in config and not isinstance(config["metricsReporting"], bool):
        found.append("metricsReporting: must be true or false")
    glob_found, global_timeout = _global_problems(config.get("pluginConfig", {}))
    cond_found, conditions = _condition_problems(config.get("conditions", []))
    rules = config.get("rules")
    if not isinstance(rules, list) or not rules:
        return found + glob_found + cond_found + ["rules: at least one rule"]
    for i, rule in enumerate(rules):
        cond_found += _rule_problems(i, rule, global_timeout, conditions, strict)
    return found + glob_found + cond_found


def accept_config(interval: str = "10m", timeout: str = "120s", tier: str = "quick") -> dict[str, Any]:
    """The custom plugin monitor config: the node's `accept --tier TIER --format npd`, run in the host's mount
    namespace through nsenter (the program, its config and the GPU tools are the host's, not the image's)."""
    args = ["--target", "1", "--mount", "--", ACCEPT_PROGRAM, "--tier", tier, "--format", "npd"]
    return {
        "plugin": value(NPD, "plugin"),
        "pluginConfig": {"invoke_interval": interval, "timeout": timeout, "max_output_length": 200,
                         "concurrency": 1, "enable_message_change_based_condition_update": False},
        "source": SOURCE_NAME,
        "metricsReporting": True,
        "conditions": [{"type": CONDITION, "reason": "GPUAccepted",
                        "message": f"the node passed gpunode's {tier} acceptance tier"}],
        "rules": [{"type": "permanent", "condition": CONDITION, "reason": "GPUAcceptanceFailed",
                   "path": value(NPD, "nsenter"), "args": args, "timeout": timeout}],
    }


def npd_objects(interval: str = "10m", timeout: str = "120s", tier: str = "quick", namespace: str = NAMESPACE,
                node_selector: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """ServiceAccount, ClusterRoleBinding, ConfigMap and DaemonSet: NPD's own deployment (image, privileges,
    resources, tolerations) with gpunode's monitor as its one config, on the nodes `node_selector` picks (the GPU
    nodes; default every Linux node). Raises ValueError on a config NPD refuses or a selector that is no label."""
    from gpunode.kube import label_key_ok, label_value_ok

    config = accept_config(interval, timeout, tier)
    problems = config_problems(config)
    if problems:
        raise ValueError("node-problem-detector would refuse this config: " + "; ".join(problems))
    seconds = go_duration(timeout)
    if tier in TIER_BUDGET_S and seconds is not None and seconds < TIER_BUDGET_S[tier]:
        raise ValueError(f"--timeout {timeout} is shorter than the {tier} tier's {TIER_BUDGET_S[tier]:g} s budget: "
                         "NPD would kill the acceptance program before it decides, and the condition would stay "
                         "Unknown; give --timeout 120s (the default) or more")
    selector = {"kubernetes.io/os": "linux", **(node_selector or {})}
    bad = [f"{k}={v}" for k, v in selector.items() if not label_key_ok(k) or not label_value_ok(v)]
    if bad:
        raise ValueError(f"node selector {', '.join(bad)} is not a Kubernetes label")
    labels = {"app": "gpunode-accept-npd"}
    account = value(NPD, "service_account")
    meta = {"namespace": namespace, "labels": dict(labels)}
    container = {
        "name": "node-problem-detector", "image": value(NPD, "image"), "imagePullPolicy": "IfNotPresent",
        "command": ["/node-problem-detector", "--logtostderr",
                    f"{value(NPD, 'config_flag')}=/config/{CONFIG_NAME}"],
        "resources": {"limits": {"cpu": "10m", "memory": "80Mi"}, "requests": {"cpu": "10m", "memory": "80Mi"}},
        "securityContext": {"privileged": True},  # as NPD's manifest; nsenter into PID 1's mount namespace too
        "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
        "volumeMounts": [{"name": "config", "mountPath": "/config", "readOnly": True},
                         {"name": "localtime", "mountPath": "/etc/localtime", "readOnly": True}],
    }
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account, **meta}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": "gpunode-accept-npd", "labels": dict(labels)},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": "system:node-problem-detector"},
         "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "gpunode-accept-npd-config", **meta},
         "data": {CONFIG_NAME: json.dumps(config, indent=2) + "\n"}},
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "gpunode-accept-npd", **meta},
         "spec": {"selector": {"matchLabels": dict(labels)}, "template": {
             "metadata": {"labels": dict(labels)},
             "spec": {"serviceAccountName": account, "hostPID": True,  # nsenter --target 1: the host's PID 1
                      "nodeSelector": selector, "containers": [container],
                      "volumes": [{"name": "config", "configMap": {"name": "gpunode-accept-npd-config"}},
                                  {"name": "localtime", "hostPath": {"path": "/etc/localtime"}}],
                      "tolerations": [{"effect": "NoSchedule", "operator": "Exists"},
                                      {"effect": "NoExecute", "operator": "Exists"}]}}}},
    ]
