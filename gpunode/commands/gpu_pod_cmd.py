"""`gpu-pod`: the training Pod or Job for Alibaba ECI or Tencent EKS, mounting the claim `nfs-volume` wrote."""

from __future__ import annotations

import yaml

from gpunode.errors import UsageError
from gpunode.gpupod.manifest import GpuPod, Refused

SOURCE = "gpu-pod"


def parse_env(pairs: list[str]) -> dict[str, str]:
    """`K=V` pairs -> the container's environment, in order."""
    env: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--env {pair!r} is not NAME=VALUE", source=SOURCE, fix="e.g. --env MODEL_DIR=/tf/model")
        env[key] = value
    return env


def gpu_pod_yaml(pod: GpuPod) -> str:
    """The object as YAML for `kubectl apply -f -`; a refused combination is a usage error naming rule and page."""
    try:
        document = pod.manifest()
    except Refused as exc:
        raise UsageError(str(exc), source=SOURCE, fix=f"see `gpunode {SOURCE} --help` and docs/seeds/") from None
    return yaml.safe_dump_all([document], sort_keys=False, explicit_start=True, allow_unicode=True)
