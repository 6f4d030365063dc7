"""The ECS agent's configuration files as ecs-init reads them (gpunode/vendor_aws.py cites where)."""

from __future__ import annotations

from gpunode.vendor_aws import fact

KEY, VALUE = fact("ecs_gpu_key"), fact("ecs_gpu_value")
RUNTIME_KEY, RUNTIME = fact("ecs_runtime_key"), fact("ecs_nvidia_runtime")
INSTANCE_CONFIG, USER_CONFIG = fact("ecs_instance_config"), fact("ecs_user_config")


def config_value(text: str, key: str = KEY) -> str | None:
    """The value ecs-init reads for `key` from an ecs.config text: each trimmed line split at its first '=', the
    last assignment winning, nothing else trimmed or unquoted (ecs-init/docker/docker.go getEnvVars)."""
    found = None
    for line in text.strip().split("\n"):
        name, sep, value = line.strip().partition("=")
        if sep and name == key:
            found = value
    return found


def set_key(text: str, key: str = KEY, value: str = VALUE) -> str:
    """`text` with `key=value` in place of the first assignment of `key` (later ones removed), or appended; every
    other line kept as it was."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    assigned = [i for i, line in enumerate(lines) if line.strip().partition("=")[0] == key and "=" in line]
    if assigned:
        lines[assigned[0]] = f"{key}={value}"
        lines = [line for i, line in enumerate(lines) if i not in assigned[1:]]
    else:
        lines.append(f"{key}={value}")
    return "\n".join(lines) + "\n"
