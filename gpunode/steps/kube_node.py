"""A Kubernetes node whose cloud already set up the GPU stack (ACK and TKE GPU node pools): recognised from what the
node holds, so that the driver and container-toolkit steps keep it (verify only) and the Docker step does not put a
second engine beside the cluster's containerd.

What is read on the node (one probe snippet, shared by the steps that ask):
- kubelet: its program in PATH or its unit file. A node without kubelet is not a Kubernetes node, whatever else it has.
- the device plugin: ACK deploys NVIDIA's device plugin as a static pod,
  `/etc/kubernetes/manifests/nvidia-device-plugin.yml` (the KUBE_NODE table); any running NVIDIA device plugin
  (ACK's, TKE's, a DaemonSet) serves the socket `/var/lib/kubelet/device-plugins/nvidia-gpu.sock` for the resource
  nvidia.com/gpu.
- the driver: loaded or nvidia-smi present (facts), and installed by no package (the cloud's installer): a driver that
  came from the distro's or NVIDIA's packages is one gpunode plans for as on any host.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpunode.facts import Facts
from gpunode.steps.base import Action, StepContext, StepFailed
from gpunode.vendor_facts import Fact, Pin, Source, fact_table, value

_DEVICE_PLUGIN = Pin("NVIDIA/k8s-device-plugin", "1b826acc6af3079d8923bac395c3124b8861a9a6")  # tag v0.20.0

KUBE_NODE = fact_table("kube_node", {
    "ack_static_pod": Fact("/etc/kubernetes/manifests/nvidia-device-plugin.yml", Source(
        url="https://www.alibabacloud.com/help/en/ack/ack-managed-and-ack-dedicated/user-guide/"
            "gpu-device-plugin-related-operations"),
        "ACK (exclusive GPU scheduling) deploys the GPU device plugin as a static pod by default; restarting it is "
        "moving this manifest out of /etc/kubernetes/manifests and back"),
    "ack_pod_label": Fact("component=nvidia-device-plugin", Source(
        url="https://help.aliyun.com/document_detail/207292.htm"),
        "ACK's check after a node joins: kubectl get po -n kube-system -l component=nvidia-device-plugin lists "
        "ack-nvidia-device-plugin-<id> on the new node"),
    "ack_driver_label": Fact("ack.aliyun.com/nvidia-driver-version", Source(
        url="https://help.aliyun.com/document_detail/207292.htm"),
        "the node pool label that picks the driver ACK installs; it applies when a node joins the pool, existing "
        "nodes keep theirs (remove and re-add them)"),
    "tke_driver_api": Fact("DescribeGPUInfo", Source(url="https://cloud.tencent.com/document/api/457/129269"),
        "TKE API 2022-05-01: the GPU driver (and CUDA, cuDNN) versions TKE offers for an instance type and OS; "
        "the node pool installs the chosen one"),
    "plugin_socket": Fact("/var/lib/kubelet/device-plugins/nvidia-gpu.sock",
        _DEVICE_PLUGIN.at("internal/plugin/server.go", "102-107"),
        "the socket is DevicePluginPath (/var/lib/kubelet/device-plugins/, vendor/k8s.io/kubelet/pkg/apis/"
        "deviceplugin/v1beta1/constants.go:30) + 'nvidia-' + the resource's name (gpu) + '.sock'"),
})

KUBELET_UNITS = ("/etc/systemd/system/kubelet.service", "/usr/lib/systemd/system/kubelet.service",
                 "/lib/systemd/system/kubelet.service")
# Package names of NVIDIA's container stack: present on a node does not mean the driver came from a package.
_TOOLKIT_PREFIXES = ("libnvidia-container", "nvidia-container", "nvidia-docker")


def probe_snippet() -> str:
    """Shell printing one marker per line: `kubelet PATH`, `static-pod PATH`, `socket PATH` (read-only)."""
    units = " ".join(KUBELET_UNITS)
    return (f"p=$(command -v kubelet 2>/dev/null) && echo \"kubelet $p\"; "
            f"for u in {units}; do [ -e \"$u\" ] && echo \"kubelet $u\"; done; "
            f"[ -e {value(KUBE_NODE, 'ack_static_pod')} ] && echo 'static-pod {value(KUBE_NODE, 'ack_static_pod')}'; "
            f"[ -S {value(KUBE_NODE, 'plugin_socket')} ] && echo 'socket {value(KUBE_NODE, 'plugin_socket')}'; true")


@dataclass(frozen=True)
class KubeNode:
    """What the probe found: kubelet's paths and the device plugin's evidence (the static pod, the socket)."""

    kubelet: tuple[str, ...] = ()
    device_plugin: tuple[str, ...] = ()

    @property
    def is_kubernetes(self) -> bool:
        return bool(self.kubelet)

    @property
    def evidence(self) -> str:
        """The device plugin's evidence, as the plan says it."""
        ack = value(KUBE_NODE, "ack_static_pod")
        return "; ".join(f"{path} (ACK's static pod of NVIDIA's device plugin)" if path == ack else
                         f"{path} (a running NVIDIA device plugin)" for path in self.device_plugin)


def parse(text: str) -> KubeNode:
    kubelet, plugin = [], []
    for line in text.splitlines():
        marker, _, path = line.strip().partition(" ")
        if marker == "kubelet" and path not in kubelet:
            kubelet.append(path)
        elif marker in ("static-pod", "socket") and path not in plugin:
            plugin.append(path)
    return KubeNode(tuple(kubelet), tuple(plugin))


def packaged_driver(facts: Facts) -> list[str]:
    """The NVIDIA driver's packages on the host (the container toolkit's are not the driver)."""
    return sorted(n for n in facts.nvidia.packages if not n.startswith(_TOOLKIT_PREFIXES))


def cloud_driver(facts: Facts, node: KubeNode) -> str:
    """Why this node's GPU stack is the cloud's ("" when it is not): kubelet, an NVIDIA device plugin, and a driver
    that no package installed. A device plugin without a driver is refused: the cloud's install did not finish."""
    if not node.is_kubernetes or not node.device_plugin or packaged_driver(facts):
        return ""
    driver = facts.nvidia.driver_version or (facts.nvidia.nvidia_smi and "nvidia-smi present")
    if not driver:
        raise StepFailed(f"a Kubernetes node whose cloud runs NVIDIA's device plugin ({node.evidence}), but no "
                         "NVIDIA driver is loaded and nvidia-smi is missing: the cloud's driver install did not "
                         "finish (ACK and TKE install it when the node joins its GPU node pool)",
                         fix="check the node pool's driver setting (ACK: the label "
                         f"{value(KUBE_NODE, 'ack_driver_label')}; TKE: the pool's GPU driver) and re-add the node; "
                         "or, on a node you manage yourself, run with --var cloud_driver=replace")
    return (f"Kubernetes node (kubelet {node.kubelet[0]}) whose cloud installed the NVIDIA driver ({driver}, from "
            f"no package) and runs the device plugin: {node.evidence}")


def verify_only(ctx: StepContext, what: str, command: str, setting: str) -> list[Action]:
    """The plan of a step whose component the cloud installed: one read-only check, the reason said."""
    why = cloud_driver(ctx.facts, parse(ctx.probe["kube_node"]))
    if not why:
        return []
    ctx.notes.append(f"{what}: verify only, kept as the cloud installed it ({setting}=replace installs gpunode's)")
    return [Action(f"verify only: the {what} the cloud installed", why, command, changes=False,
                   fix=f"the cloud's {what} does not answer: repair it through the node pool (re-add the node), or "
                   f"--var {setting}=replace to install gpunode's")]
