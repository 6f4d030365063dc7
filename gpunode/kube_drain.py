"""Take a Kubernetes node out of service and put it back the way `kubectl drain` / `kubectl uncordon` do: cordon,
evict (the policy/v1 Eviction subresource, so PodDisruptionBudgets are honoured), wait for the pods to go, and after
the change uncordon. Every decision is kubectl's, read at kubernetes/kubectl@dee3483a (KUBECTL below):

- cordon/uncordon: GET the node, and only when spec.unschedulable differs, a strategic merge PATCH of
  spec.unschedulable (pkg/drain/cordon.go:63-120; pkg/cmd/drain/drain.go:400-470: "already cordoned").
- the pods: GET /api/v1/pods?fieldSelector=spec.nodeName=NODE&limit=500, following `continue`
  (pkg/drain/drain.go:185-218; pkg/cmd/drain/drain_test.go:814-819 pins the query; --chunk-size default 500).
- which pods go (pkg/drain/filters.go:150-263, in this order, the first that says "not deleted" wins): pods past
  their deletion by --skip-wait-for-delete-timeout are skipped; DaemonSet pods are an error unless
  --ignore-daemonsets (then skipped), orphans of a deleted DaemonSet need --force; mirror (static) pods are
  skipped; pods with emptyDir need --delete-emptydir-data; pods with no controller need --force; finished pods
  (Succeeded/Failed) always go. Any error stops the drain before anything is evicted (the node stays cordoned,
  pkg/cmd/drain/drain.go:325-370).
- eviction: GET /api/v1 to find the pods/eviction subresource's version (drain.go:116-133), then POST
  .../pods/NAME/eviction with an Eviction body (drain.go:152-179); 404: gone; 429 (a PodDisruptionBudget
  refuses, or is being processed): wait EvictErrorRetryDelay (5 s, pkg/cmd/drain/drain.go:155) and try again,
  re-reading the pod (drain.go:320-351); 403 NamespaceTerminating: wait for a pod already deleting; anything
  else fails the pod.
- wait: GET each pod every second until it is 404 or its UID changed (drain.go:356-370, 435-470).

kubectl retries a 429 until its --timeout (default: for ever). gpunode bounds it (`max_attempts`) and, when the
bound is hit, names the blocking PodDisruptionBudget from the API server's refusal (the DisruptionBudget cause,
kubernetes/kubernetes pkg/registry/core/pod/storage/eviction.go checkAndDecrement). kubectl evicts pods in parallel;
gpunode evicts them one after the other (the same calls, in a fixed order: what plan cases can pin).
"""

from __future__ import annotations

import calendar
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

from gpunode.errors import GpunodeError
from gpunode.vendor_facts import Fact, Pin, Source, fact_table, value

KUBECTL = Pin("kubernetes/kubectl", "dee3483a3d6a64c07fdf746caf80af446dee99ac")
_EVICTION_GO = ("https://github.com/kubernetes/kubernetes/blob/277391ee713412cf75e4b46ad5d6e5ae9844abf1/"
                "pkg/registry/core/pod/storage/eviction.go")

DRAIN = fact_table("kubectl-drain", {
    "retry_delay": Fact(5.0, KUBECTL.at("pkg/cmd/drain/drain.go", "155"), "EvictErrorRetryDelay: 5 s"),
    "chunk_size": Fact(500, KUBECTL.at("pkg/cmd/util/helpers.go", "55"), "DefaultChunkSize: --chunk-size"),
    "grace_period": Fact(-1, KUBECTL.at("pkg/cmd/drain/drain.go", "154"),
                         "negative: each pod's own terminationGracePeriodSeconds (no gracePeriodSeconds sent)"),
    "poll_interval": Fact(1.0, KUBECTL.at("pkg/drain/drain.go", "359"), "waitForDelete polls every second"),
    "eviction_subresource": Fact(("pods/eviction", "Eviction"), KUBECTL.at("pkg/drain/drain.go", "44-48"),
                                 "the discovery entry CheckEvictionSupport looks for in GET /api/v1"),
    "mirror_annotation": Fact("kubernetes.io/config.mirror", KUBECTL.at("pkg/drain/filters.go", "211-216"),
                              "corev1.MirrorPodAnnotationKey: a static pod's mirror, skipped"),
    "daemonset_fatal": Fact("DaemonSet-managed Pods (use --ignore-daemonsets to ignore)",
                            KUBECTL.at("pkg/drain/filters.go", "31"), "daemonSetFatal"),
    "local_storage_fatal": Fact("Pods with local storage (use --delete-emptydir-data to override)",
                                KUBECTL.at("pkg/drain/filters.go", "33"), "localStorageFatal"),
    "unmanaged_fatal": Fact("Pods that declare no controller (use --force to override)",
                            KUBECTL.at("pkg/drain/filters.go", "35"), "unmanagedFatal"),
    "pdb_cause": Fact("DisruptionBudget", Source(url=_EVICTION_GO),
                      "checkAndDecrement: 429 'Cannot evict pod as it would violate the pod's disruption budget.' "
                      "with a cause of this type: 'The disruption budget NAME needs N healthy pods and has M "
                      "currently' (or '... is still being processed by the server.')"),
})

_PDB_NAME = re.compile(r"The disruption budget (\S+?) (?:needs|is still|does not)")


@dataclass(frozen=True)
class Call:
    """One API request: method, path (with its query), JSON body."""

    method: str
    path: str
    body: Any = None
    content_type: str = ""

    def line(self) -> str:
        return f"{self.method} {self.path}"


@dataclass(frozen=True)
class Reply:
    status: int
    body: Any = None


Api = Callable[[Call], Reply]


@dataclass(frozen=True)
class DrainOptions:
    """kubectl drain's flags that gpunode sets, and gpunode's bounds."""

    ignore_daemonsets: bool = True      # --ignore-daemonsets: the device plugin and NPD stay (they are DaemonSets)
    delete_emptydir_data: bool = False  # --delete-emptydir-data
    force: bool = False                 # --force: pods with no controller (and orphaned DaemonSet pods) go too
    grace_period: int = -1              # --grace-period
    skip_wait_for_delete_timeout: int = 0  # --skip-wait-for-delete-timeout (seconds)
    retry_delay: float = 5.0            # EvictErrorRetryDelay
    max_attempts: int = 60              # gpunode's bound on PDB refusals per pod (60 x 5 s = 5 minutes)
    wait_timeout: float = 600.0         # gpunode's bound on the wait for evicted pods to terminate
    chunk_size: int = 500


@dataclass
class Verdict:
    """What the filters decided for one pod (filters.go PodDeleteStatus)."""

    pod: dict[str, Any]
    delete: bool
    status: str  # Okay, Skip, Warning, Error
    message: str = ""

    @property
    def name(self) -> str:
        meta = self.pod.get("metadata", {})
        return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


@dataclass
class DrainResult:
    node: str
    evicted: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    planned: list[Call] = field(default_factory=list)  # check mode: the changes not made
    log: list[str] = field(default_factory=list)


class DrainError(GpunodeError):
    """A drain that cannot go on; the message names the node, the pods and the PDB."""


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("metadata") or {}


def _finished(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _controller(pod: dict[str, Any]) -> dict[str, Any] | None:
    """metav1.GetControllerOf: the owner reference with controller: true."""
    return next((ref for ref in _meta(pod).get("ownerReferences") or [] if ref.get("controller")), None)


def node_path(node: str) -> str:
    return f"/api/v1/nodes/{quote(node, safe='')}"


def pod_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}"


# ---- cordon / uncordon ---------------------------------------------------------------------------------------
def cordon_calls(api: Api, node: str, desired: bool, check: bool, result: DrainResult) -> None:
    """GET the node; PATCH spec.unschedulable only when it differs (cordon.go:63-69). The strategic merge patch of
    a bool with omitempty: true, or null to clear it (cordon.go:84-107)."""
    reply = api(Call("GET", node_path(node)))
    if reply.status == 404:
        raise DrainError(f"node {node}: not found in the cluster",
                         fix="the inventory host's Kubernetes node name must match (kubectl get nodes)")
    _raise_for(reply, f"node {node}: reading the node")
    current = bool(((reply.body or {}).get("spec") or {}).get("unschedulable"))
    if current == desired:
        result.log.append(f"node {node} already {'cordoned' if desired else 'uncordoned'}")
        return
    patch = Call("PATCH", node_path(node), {"spec": {"unschedulable": True if desired else None}},
                 "application/strategic-merge-patch+json")
    if check:
        result.planned.append(patch)
        return
    _raise_for(api(patch), f"node {node}: {'cordon' if desired else 'uncordon'}")
    result.log.append(f"node {node} {'cordoned' if desired else 'uncordoned'}")


def _raise_for(reply: Reply, what: str) -> None:
    if reply.status >= 400:
        message = (reply.body or {}).get("message", "") if isinstance(reply.body, dict) else ""
        raise DrainError(f"{what}: the API server answered {reply.status} {message}".rstrip(),
                         fix="check the credentials' RBAC (nodes get/patch, pods list/get, pods/eviction create)")


# ---- the pods and the filters ---------------------------------------------------------------------------------
def list_pods(api: Api, node: str, chunk_size: int) -> list[dict[str, Any]]:
    """Every pod on the node, chunk by chunk (resource.FollowContinue)."""
    pods: list[dict[str, Any]] = []
    token = ""
    while True:
        query = {"fieldSelector": f"spec.nodeName={node}", "limit": str(chunk_size)}
        if token:
            query["continue"] = token
        reply = api(Call("GET", f"/api/v1/pods?{urlencode(query)}"))
        _raise_for(reply, f"node {node}: listing its pods")
        pods += (reply.body or {}).get("items") or []
        token = ((reply.body or {}).get("metadata") or {}).get("continue") or ""
        if not token:
            return pods


def _daemonset_verdict(api: Api, pod: dict[str, Any], opts: DrainOptions) -> Verdict:
    ref = _controller(pod)
    if not ref or ref.get("kind") != "DaemonSet" or ref.get("apiVersion") != "apps/v1" or _finished(pod):
        return Verdict(pod, True, "Okay")
    namespace = _meta(pod).get("namespace", "")
    reply = api(Call("GET", f"/apis/apps/v1/namespaces/{quote(namespace, safe='')}/daemonsets/"
                            f"{quote(ref.get('name', ''), safe='')}"))
    if reply.status >= 400:
        message = f"daemonsets.apps \"{ref.get('name')}\" not found" if reply.status == 404 else \
            f"reading its DaemonSet: {reply.status}"
        if reply.status == 404 and opts.force:
            return Verdict(pod, True, "Warning", message)
        return Verdict(pod, False, "Error", message)
    if not opts.ignore_daemonsets:
        return Verdict(pod, False, "Error", value(DRAIN, "daemonset_fatal"))
    return Verdict(pod, False, "Warning", "ignoring DaemonSet-managed Pods")


def _skip_deleted(pod: dict[str, Any], opts: DrainOptions, now: float) -> bool:
    stamp = _meta(pod).get("deletionTimestamp")
    if opts.skip_wait_for_delete_timeout <= 0 or not stamp:
        return False
    deleted = calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ"))  # RFC 3339 in UTC, as the API writes it
    return now - deleted > opts.skip_wait_for_delete_timeout


def _mirror_verdict(pod: dict[str, Any]) -> Verdict:
    skip = value(DRAIN, "mirror_annotation") in (_meta(pod).get("annotations") or {})
    return Verdict(pod, not skip, "Skip" if skip else "Okay")


def _local_storage_verdict(pod: dict[str, Any], opts: DrainOptions) -> Verdict:
    volumes = (pod.get("spec") or {}).get("volumes") or []
    if not any("emptyDir" in v for v in volumes) or _finished(pod):
        return Verdict(pod, True, "Okay")
    if not opts.delete_emptydir_data:
        return Verdict(pod, False, "Error", value(DRAIN, "local_storage_fatal"))
    return Verdict(pod, True, "Warning", "deleting Pods with local storage")


def _unreplicated_verdict(pod: dict[str, Any], opts: DrainOptions) -> Verdict:
    if _finished(pod) or _controller(pod) is not None:
        return Verdict(pod, True, "Okay")
    if not opts.force:
        return Verdict(pod, False, "Error", value(DRAIN, "unmanaged_fatal"))
    return Verdict(pod, True, "Warning", "deleting Pods that declare no controller")


def verdict(api: Api, pod: dict[str, Any], opts: DrainOptions, now: float) -> Verdict:
    """filters.go's base filters in their order (makeFilters, filters.go:150-161): the first that keeps the pod
    decides, else the last one's status stands, so an earlier warning is dropped as kubectl drops it
    (filters.go:230-232, drain.go:220-245)."""
    if _skip_deleted(pod, opts, now):
        return Verdict(pod, False, "Skip")
    found = Verdict(pod, True, "Okay")
    for check in (lambda: _daemonset_verdict(api, pod, opts), lambda: _mirror_verdict(pod),
                  lambda: _local_storage_verdict(pod, opts), lambda: _unreplicated_verdict(pod, opts)):
        found = check()
        if not found.delete:
            return found
    return found


def refused(node: str, verdicts: list[Verdict]) -> DrainError | None:
    """kubectl's `cannot delete MESSAGE: ns/pod, ...` for the pods the filters refuse (filters.go:77-93)."""
    by_message: dict[str, list[str]] = {}
    for v in verdicts:
        if v.status == "Error":
            by_message.setdefault(v.message or "unexpected error", []).append(v.name)
    if not by_message:
        return None
    text = "; ".join(f"cannot delete {m}: {', '.join(pods)}" for m, pods in by_message.items())
    return DrainError(f"node {node}: drain refused before any eviction: {text} (the node stays cordoned)",
                      fix="set the group's drain options (ignore_daemonsets, delete_emptydir_data, force) "
                          "to let those pods go, or move them off the node yourself")


# ---- eviction -------------------------------------------------------------------------------------------------
def eviction_version(api: Api) -> str:
    """The pods/eviction subresource's group/version from discovery, "" when the server has none (then kubectl
    deletes pods instead: drain.go:258-269)."""
    reply = api(Call("GET", "/api/v1"))
    _raise_for(reply, "discovery (GET /api/v1)")
    name, kind = value(DRAIN, "eviction_subresource")
    for res in (reply.body or {}).get("resources") or []:
        if res.get("name") == name and res.get("kind") == kind and res.get("group") and res.get("version"):
            return f"{res['group']}/{res['version']}"
    return ""


def eviction_call(pod: dict[str, Any], version: str, grace_period: int) -> Call:
    """POST pods/NAME/eviction with an Eviction of the given version (drain.go:135-179)."""
    meta = _meta(pod)
    options: dict[str, Any] = {}
    if grace_period >= 0:
        options["gracePeriodSeconds"] = grace_period
    body = {"apiVersion": version, "kind": "Eviction",
            "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace")}, "deleteOptions": options}
    return Call("POST", pod_path(meta.get("namespace", ""), meta.get("name", "")) + "/eviction", body)


def _causes(reply: Reply) -> list[dict[str, Any]]:
    body = reply.body if isinstance(reply.body, dict) else {}
    return list((body.get("details") or {}).get("causes") or [])


def blocking_pdb(reply: Reply) -> str:
    """The PodDisruptionBudget a 429 names (its DisruptionBudget cause), or ""."""
    for cause in _causes(reply):
        if cause.get("type") == value(DRAIN, "pdb_cause"):
            match = _PDB_NAME.search(cause.get("message", ""))
            return match.group(1) if match else cause.get("message", "")
    return ""


def _terminating_namespace(reply: Reply) -> bool:
    return reply.status == 403 and any(c.get("type") == "NamespaceTerminating" for c in _causes(reply))


def evict(api: Api, node: str, pod: dict[str, Any], version: str, opts: DrainOptions,
          sleep: Callable[[float], None], result: DrainResult) -> bool:
    """Evict one pod, retrying PDB refusals up to opts.max_attempts; True when it must be waited for, False when
    it is already gone. Raises DrainError naming the PDB when the bound is hit (drain.go:297-351)."""
    active = pod
    name = f"{_meta(pod).get('namespace')}/{_meta(pod).get('name')}"
    last = Reply(0)
    for attempt in range(1, opts.max_attempts + 1):
        last = api(eviction_call(active, version, opts.grace_period))
        if last.status < 300:
            result.evicted.append(name)
            return True
        if last.status == 404:
            return False
        deleting = bool(_meta(active).get("deletionTimestamp"))
        if _terminating_namespace(last) and deleting:
            return True
        if last.status != 429 and not _terminating_namespace(last):
            _raise_for(last, f"node {node}: evicting pod {name}")
        result.log.append(f"evicting pod {name}: refused ({last.status}"
                          f"{', PodDisruptionBudget ' + blocking_pdb(last) if blocking_pdb(last) else ''}), "
                          f"attempt {attempt} of {opts.max_attempts}; retrying in {opts.retry_delay:g}s")
        sleep(opts.retry_delay)
        fresh = api(Call("GET", pod_path(_meta(pod).get("namespace", ""), _meta(pod).get("name", ""))))
        if fresh.status == 200 and isinstance(fresh.body, dict):
            active = fresh.body  # errors ignored: eviction sorts it out with the pod it had (drain.go:346-350)
    pdb = blocking_pdb(last)
    why = f"PodDisruptionBudget {pdb} refused it" if pdb else f"the API server answered {last.status}"
    raise DrainError(f"node {node}: pod {name} not evicted after {opts.max_attempts} attempts "
                     f"{opts.retry_delay:g}s apart: {why}", fix=(
                         f"raise the budget's disruptions (kubectl get pdb {pdb} -n {_meta(pod).get('namespace')}) "
                         "or wait for its other pods to be healthy; the node stays cordoned" if pdb else
                         "see the API server's message; the node stays cordoned"))


def wait_gone(api: Api, node: str, pods: list[dict[str, Any]], opts: DrainOptions,
              sleep: Callable[[float], None], clock: Callable[[], float]) -> None:
    """Poll each pod until 404 or a new UID (drain.go:435-470), bounded by opts.wait_timeout; the pods still
    there are named when the bound is hit."""
    interval = value(DRAIN, "poll_interval")
    start = clock()
    pending = list(pods)
    while True:
        still = []
        for pod in pending:
            meta = _meta(pod)
            reply = api(Call("GET", pod_path(meta.get("namespace", ""), meta.get("name", ""))))
            if reply.status == 404 or (reply.status == 200 and _meta(reply.body or {}).get("uid") != meta.get("uid")):
                continue
            _raise_for(reply, f"node {node}: waiting for pod {meta.get('namespace')}/{meta.get('name')}")
            still.append(pod)
        pending = still
        if not pending:
            return
        if clock() - start >= opts.wait_timeout:
            names = ", ".join(f"{_meta(p).get('namespace')}/{_meta(p).get('name')}" for p in pending)
            raise DrainError(f"node {node}: pods still terminating after {opts.wait_timeout:g}s: {names}",
                             fix="their terminationGracePeriodSeconds may be longer; raise the drain's wait "
                                 "timeout or see why they do not stop (kubectl describe pod)")
        sleep(interval)


# ---- the whole drain ------------------------------------------------------------------------------------------
def drain(api: Api, node: str, opts: DrainOptions | None = None, *, check: bool = False,
          sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic) -> DrainResult:
    """cordon -> list -> filter -> evict -> wait, as `kubectl drain` (pkg/cmd/drain/drain.go:325-398). In check
    mode only the reads are made; the cordon and the evictions are returned in `planned` (kubectl --dry-run=client
    lists the pods it would evict the same way)."""
    opts = opts or DrainOptions()
    result = DrainResult(node)
    cordon_calls(api, node, True, check, result)
    pods = list_pods(api, node, opts.chunk_size)
    verdicts = [verdict(api, pod, opts, time.time()) for pod in pods]
    error = refused(node, verdicts)
    if error:
        raise error
    result.warnings = [f"{v.message}: {v.name}" for v in verdicts if v.status == "Warning"]
    result.skipped = [v.name for v in verdicts if not v.delete]
    going = [v.pod for v in verdicts if v.delete]
    if not going:
        return result
    version = eviction_version(api)
    if not version:  # kubectl would delete the pods (drain.go:258-269): that ignores PodDisruptionBudgets
        raise DrainError(f"node {node}: the API server offers no pods/eviction subresource",
                         fix="gpunode only evicts (PodDisruptionBudgets honoured); drain this node by hand")
    if check:
        result.planned += [eviction_call(p, version, opts.grace_period) for p in going]
        return result
    waiting = [p for p in going if evict(api, node, p, version, opts, sleep, result)]
    wait_gone(api, node, waiting, opts, sleep, clock)
    return result


def uncordon(api: Api, node: str, *, check: bool = False) -> DrainResult:
    """`kubectl uncordon`: GET the node, PATCH spec.unschedulable away when it is set."""
    result = DrainResult(node)
    cordon_calls(api, node, False, check, result)
    return result
