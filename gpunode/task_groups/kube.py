"""The Kubernetes tasks: the objects they print (nfs-volume, gpu-pod, runtime-class, k8s-manifest) and k8s-drain."""

from __future__ import annotations

import json

from gpunode.commands.common import cli_errors
from gpunode.errors import UsageError
from gpunode.task_groups.base import NFS_HELP, _whole, gtask


@gtask(iterable=["label"], help={**{k: v for k, v in NFS_HELP.items() if k != "path"},
             "name": "name of the PersistentVolume and its claim", "size": "capacity (default 1Ti)",
             "namespace": "namespace of the claim (default default)",
             "label": "KEY=VALUE label on the PV that the claim selects (selector.matchLabels); repeatable",
             "driver": "nfs (the in-tree NFS source, default) or csi (the vendor's CSI driver: Alibaba NAS, AWS EFS, "
                       "Tencent CFS)"})
def nfs_volume(c, server=None, export=None, name=None, vendor="generic", nfs_version=None, options=None,
               size="1Ti", namespace="default", label=None, driver="nfs"):
    """Print a Kubernetes PersistentVolume + PersistentVolumeClaim (ReadWriteMany) for an NFS share."""
    from gpunode.commands.nfs_cmd import nfs_args
    from gpunode.commands.nfs_cmd import nfs_volume as make

    with cli_errors():
        args = nfs_args(server, export, f"/mnt/{name or 'nfs'}", vendor, nfs_version, options, task="nfs-volume")
        if not name:
            from gpunode.errors import UsageError

            raise UsageError("nfs-volume needs --name", fix="e.g. --name datasets")
        print(make(args, name, size, namespace, label or [], driver), end="")



@gtask(iterable=["env"], help={
    "cloud": "eci (Alibaba Cloud ECI: ACK Serverless / virtual nodes) or tke-eks (Tencent EKS / TKE super nodes)",
    "image": "the training image", "command": "the training command (run as sh -c COMMAND)",
    "gpus": "GPUs for the container (its nvidia.com/gpu limit; default 1)",
    "gpu_type": "eci: ECS GPU instance types for eci-use-specs, in priority order (e.g. ecs.gn6i-c4g1.xlarge); "
                "tke-eks: GPU models for the gpu-type annotation (V100, T4, 1/2*T4, 1/4*T4; e.g. T4,V100)",
    "pvc": "the claim to mount (the --name given to `gpunode nfs-volume`)",
    "mount_path": "where the claim is mounted in the container", "name": "the Pod or Job name (default train)",
    "namespace": "namespace (the claim's; default default)", "kind": "pod (default) or job (batch/v1)",
    "env": "NAME=VALUE for the container's environment; repeatable",
    "cpu": "tke-eks: the pod's cores (cpu annotation; with --memory, and gpu-count is then written too)",
    "memory": "tke-eks: the pod's memory in Gi, e.g. 32Gi (mem annotation; with --cpu)",
})
def gpu_pod(c, cloud=None, image=None, command=None, gpus="1", gpu_type=None, pvc=None, mount_path=None,
            name="train", namespace="default", kind="pod", env=None, cpu=None, memory=None):
    """Print the training Pod or Job for a serverless GPU cloud (Alibaba ECI, Tencent EKS), mounting a claim.

    The cloud's GPU annotations and the nvidia.com/gpu limit are written as the vendors document them (sources in
    gpunode/gpupod/facts.py); combinations their guides forbid are refused (exit 2) with the rule and its page.
    """
    from gpunode.commands.gpu_pod_cmd import gpu_pod_yaml, parse_env
    from gpunode.gpupod.manifest import GpuPod

    with cli_errors():
        missing = [f"--{flag}" for flag, value in (("cloud", cloud), ("image", image), ("command", command),
                                                   ("gpu-type", gpu_type), ("pvc", pvc), ("mount-path", mount_path))
                   if not value]
        if missing:
            example = ("--cloud eci --gpu-type ecs.gn6i-c4g1.xlarge" if cloud == "eci" else
                       "--cloud tke-eks --gpu-type T4")  # the example of the cloud asked for
            raise UsageError(f"gpu-pod needs {', '.join(missing)}",
                             fix=f"e.g. gpunode gpu-pod {example} --image IMAGE --command 'python3 train.py' "
                                 "--pvc datasets --mount-path /data")
        pod = GpuPod(cloud, image, command, _whole("--gpus", gpus) or 0, gpu_type, pvc, mount_path, name, namespace,
                     kind, parse_env(env or []), cpu, memory)
        print(gpu_pod_yaml(pod), end="")


@gtask(iterable=["node_selector"], help={
    "name": "RuntimeClass name (default nvidia): pods select it with runtimeClassName",
    "handler": "containerd runtime handler (default nvidia: the runtime container_runtime adds)",
    "node_selector": "KEY=VALUE label of the GPU nodes, so such pods land only there; repeatable",
})
def runtime_class(c, name="nvidia", handler="nvidia", node_selector=None):
    """Print a Kubernetes RuntimeClass for the nvidia runtime (clusters where it is not the default)."""
    from gpunode.commands.common import option_pairs
    from gpunode.kube import runtime_class as make
    from gpunode.steps.nfs.k8s import manifests_yaml

    with cli_errors():
        selector = option_pairs(node_selector, "--node-selector", "KEY=VALUE", "gpu=true")
        try:
            print(manifests_yaml([make(name, handler, selector)]), end="")
        except ValueError as exc:
            raise UsageError(str(exc), fix="see gpunode --help runtime-class") from None


@gtask(positional=["what"], iterable=["env", "node_selector"], help={
    "what": "device-plugin (NVIDIA's device plugin DaemonSet, pinned release), tfjob (a Kubeflow TFJob) or "
            "accept-npd (node-problem-detector running the node's acceptance quick tier: condition "
            "GPUAcceptanceProblem)",
    "interval": "accept-npd: how often the node's acceptance program runs (a Go duration; default 10m)",
    "timeout": "accept-npd: the program's time limit (a Go duration; default 120s)",
    "node_selector": "accept-npd: KEY=VALUE label of the GPU nodes it runs on (e.g. nvidia.com/gpu.present=true); "
                     "repeatable",
    "name": "tfjob: the TFJob's name", "image": "tfjob: the training image (Chief and Workers)",
    "ps_image": "tfjob: the parameter servers' image (default --image)",
    "command": "tfjob: the command, e.g. 'python /app/main.py'", "claim": "tfjob: the PersistentVolumeClaim to "
    "mount (the --name given to gpunode nfs-volume)", "mount_path": "tfjob: where it is mounted (default /training)",
    "workers": "tfjob: Worker replicas (default 1)", "ps": "tfjob: parameter servers (default 1; 0: none)",
    "gpus": "tfjob: GPUs per Chief/Worker (default 1)", "no_chief": "tfjob: no Chief replica (Worker 0 leads)",
    "namespace": "tfjob: its namespace (default default)", "env": "tfjob: NAME=VALUE in every replica; repeatable",
})
def k8s_manifest(c, what, name=None, image=None, ps_image=None, command=None, claim=None, mount_path="/training",
                 workers=1, ps=1, gpus=1, no_chief=False, namespace="default", env=None, interval="10m",
                 timeout="120s", node_selector=None):
    """Print Kubernetes objects for self-managed GPU node pools: NVIDIA's device plugin, a TFJob on a PVC, or
    node-problem-detector running the node's acceptance program (a node condition the cluster can act on)."""
    from gpunode.commands import kube_cmd
    from gpunode.errors import UsageError
    from gpunode.steps.nfs.k8s import manifests_yaml

    with cli_errors():
        if what == "device-plugin":
            objects = kube_cmd.device_plugin()
        elif what == "tfjob":
            objects = kube_cmd.tfjob(name or "", image or "", claim or "", ps_image=ps_image or "",
                                     command=command or "", mount_path=mount_path, chief=not no_chief,
                                     workers=int(workers), ps=int(ps), gpus=int(gpus), namespace=namespace, env=env)
        elif what == "accept-npd":
            from gpunode.commands.common import option_pairs
            from gpunode.kube_npd import npd_objects

            try:
                selector = option_pairs(node_selector, "--node-selector", "KEY=VALUE",
                                        "nvidia.com/gpu.present=true")
                objects = npd_objects(interval=interval, timeout=timeout, node_selector=selector)
            except ValueError as exc:
                raise UsageError(f"k8s-manifest accept-npd: {exc}",
                                 fix="--interval and --timeout are Go durations (a number and ns, us, ms, s, m or "
                                     "h: 10m, 120s), --timeout at least the tier's budget (quick: 60 s); "
                                     "--node-selector takes a label KEY=VALUE") from None
        else:
            raise UsageError(f"k8s-manifest {what!r}: no such manifest", fix="device-plugin, tfjob or accept-npd")
        print(manifests_yaml(objects), end="")


@gtask(positional=["node"], help={
    "node": "the Kubernetes node name (kubectl get nodes)",
    "kubeconfig": "the cluster's kubeconfig (default $KUBECONFIG, then ~/.kube/config)",
    "context": "the kubeconfig context (default its current-context)",
    "uncordon": "put the node back (kubectl uncordon) instead of draining it",
    "check": "read only: print the cordon and the evictions a drain would make",
    "ignore_daemonsets": "skip DaemonSet pods (default on, as the device plugin and NPD are DaemonSets)",
    "delete_emptydir_data": "evict running pods with emptyDir volumes too (their data is lost)",
    "force": "evict pods no controller manages too (they are not recreated)",
    "grace_period": "seconds each pod gets to stop (default: the pod's own)",
    "max_attempts": "PodDisruptionBudget refusals per pod before the drain stops, 5 s apart (default 60)",
    "wait_timeout": "seconds to wait for evicted pods to terminate (default 600)",
})
def k8s_drain(c, node, kubeconfig=None, context=None, uncordon=False, check=False, ignore_daemonsets=True,
              delete_emptydir_data=False, force=False, grace_period=None, max_attempts=None, wait_timeout=None):
    """Drain a Kubernetes node as `kubectl drain` does (cordon, evict honouring PodDisruptionBudgets, wait), or
    uncordon it: exit 0 done, 1 refused or timed out (the pods and the blocking budget named), 2 bad input."""
    from gpunode import kube_drain as kd
    from gpunode.kube_api import http_api, load_kubeconfig

    with cli_errors():
        opts = kd.DrainOptions(
            ignore_daemonsets=bool(ignore_daemonsets), delete_emptydir_data=bool(delete_emptydir_data),
            force=bool(force), grace_period=-1 if grace_period is None else _whole("--grace-period", grace_period),
            max_attempts=_whole("--max-attempts", max_attempts) or 60,
            wait_timeout=float(_whole("--wait-timeout", wait_timeout) or 600))
        api = http_api(load_kubeconfig(kubeconfig, context or ""))
        result = kd.uncordon(api, node, check=check) if uncordon else kd.drain(api, node, opts, check=check)
        for line in result.log + [f"warning: {w}" for w in result.warnings]:
            print(line)
        for call in result.planned:
            print(f"would: {call.line()}" + (f" {json.dumps(call.body, sort_keys=True)}" if call.body else ""))
        if not check:
            print(f"node {node} {'uncordoned' if uncordon else 'drained'}"
                  + (f": evicted {', '.join(result.evicted)}" if result.evicted else ""))
