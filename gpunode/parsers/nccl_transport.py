"""Which transports an NCCL run used, from its NCCL_DEBUG=INFO lines, and what that says about the bandwidth.

The lines are the ones NVIDIA/nccl prints (NVIDIA/nccl@5067397c2676d5aed50042fc39e5c8ee96eb0027 unless named):
- src/transport/p2p.cc:416 ``Channel %02d/%01d : %d[%d] -> %d[%d] via P2P/direct pointer%s``, :423 ``via P2P/%s%s%s``
  (CUMEM, IPC/read ...), :429 ``via P2P/IPC%s%s``, :437 ``via P2P/indirect/%d[%d]%s``; older releases print
  ``Ring %02d : ... via P2P/IPC`` (the form NVIDIA/nccl issue 398 shows);
- src/transport/shm.cc:116 ``Channel %02d : %d[%d] -> %d[%d] via SHM/direct``; v2.25.1-1 (80f6bda) shm.cc:126
  ``via SHM/%s/%s`` (``SHM/direct/direct``, ``SHM/CE/...``); v2.7.8-1 (033d799) shm.cc:78 ``via direct shared memory``;
- src/transport/net.cc:324/:328 ``Channel ... [send] via NET/%s/%d...`` and :377 ``[receive] via NET/%s/%d...``, the
  network's name being ``Socket`` (net_socket.cc), ``IB`` (net_ib), or a plugin's (``IBext``, ``AWS Libfabric``...);
  coll_net.cc:187/:214 ``via COLLNET/%s/%d``;
- src/init.cc:486 ``Using network %s``; src/transport/net_socket.cc:77 ``NET/Socket : Using%s``;
  src/transport/net_ib/init.cc:470 ``NET/IB : No device found.``, :513 ``NET/IB : Using%s %s; OOB %s:%s``;
- src/graph/paths.cc:252 ``%s set by environment to %d`` (NCCL_P2P_DISABLE) and :274 ``%s set by environment to %s``
  (NCCL_P2P_LEVEL, a path type: LOC means no P2P at all); src/misc/param.cc:100 ``%s set by environment to %lld.``
  (every NCCL_PARAM: NCCL_IB_DISABLE net_ib/init.cc:27, NCCL_SHM_DISABLE shm.cc:55, NCCL_NVB_DISABLE paths.cc:36);
- src/transport.cc:118 ``Check P2P Type isAllDirectP2p %d directMode %d isAllCudaP2p %d``; v2.25.1-1 transport.cc:97
  ``Check P2P Type intraNodeP2pSupport %d directMode %d``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpunode.parsers.model import Finding

_VIA = re.compile(r"NCCL INFO (?:Channel|Ring) \d+(?:/\d+)? : (\d+)(?:\[[0-9a-fA-F]+\])? -> (\d+)(?:\[[0-9a-fA-F]+\])?"
                  r"(?: \[(?:send|receive)\])? via (\S+(?: pointer| shared memory)?)")
_ENV = re.compile(r"NCCL INFO (NCCL_[A-Z0-9_]+) set by environment to ([^\s.]+)")
_NETWORK = re.compile(r"NCCL INFO Using network (\S+)")
_IB_NONE = re.compile(r"NCCL INFO NET/IB : No device found")
_P2P_CHECK = re.compile(r"Check P2P Type (?:intraNodeP2pSupport|isAllDirectP2p) (\d)")
_LINE_HOST = re.compile(r"^(?:\[\d+\] )?([\w.-]+):\d+:\d+ \[\d+\] NCCL ")
_SOURCE = "NVIDIA/nccl@5067397c2676 src/transport/{p2p,shm,net}.cc, src/graph/paths.cc:252/:274"


@dataclass
class NcclTransport:
    """What the INFO lines of one run say: connections by transport, the environment NCCL read, the network."""

    kinds: dict[str, int] = field(default_factory=dict)  # p2p / shm / net-socket / net-ib / net-other / collnet
    samples: dict[str, str] = field(default_factory=dict)  # one line per kind, quoted as evidence
    env: dict[str, str] = field(default_factory=dict)
    network: str | None = None
    ib_absent: bool = False
    p2p_support: int | None = None  # Check P2P Type: 0 = the GPUs cannot use P2P between them
    hosts: set[str] = field(default_factory=set)

    @property
    def seen(self) -> bool:
        """Whether the text held any NCCL_DEBUG=INFO line this reads."""
        return bool(self.kinds or self.env or self.network or self.p2p_support is not None)

    @property
    def p2p_disabled_by(self) -> str | None:
        """The setting that turned P2P off (NCCL_P2P_DISABLE=1 or NCCL_P2P_LEVEL=LOC), if one did."""
        if self.env.get("NCCL_P2P_DISABLE") == "1":
            return "NCCL_P2P_DISABLE=1"
        if self.env.get("NCCL_P2P_LEVEL", "").upper() in ("LOC", "0"):
            return f"NCCL_P2P_LEVEL={self.env['NCCL_P2P_LEVEL']}"
        return None


def is_nccl_debug(text: str) -> bool:
    """Whether text is NCCL_DEBUG=INFO output (a log of a job or a test): most of its lines NCCL INFO/WARN lines."""
    lines = [line for line in text.splitlines() if line.strip()]
    nccl = sum(1 for line in lines if " NCCL INFO " in line or " NCCL WARN " in line)
    return nccl > 0 and nccl * 2 >= len(lines)


def _kind(how: str) -> str:
    if how.startswith("P2P/"):
        return "p2p"
    if how.startswith("SHM/") or how == "direct shared memory":
        return "shm"
    if how.startswith("NET/Socket"):
        return "net-socket"
    if how.startswith(("NET/IB", "NET/IBext")):
        return "net-ib"
    if how.startswith("COLLNET/"):
        return "collnet"
    return "net-other" if how.startswith("NET/") else "other"


def parse_nccl_transport(text: str) -> NcclTransport:
    """Read every NCCL_DEBUG=INFO line of a log (mpirun's [n] prefixes and other output between them tolerated)."""
    found = NcclTransport()
    for line in text.splitlines():
        if "NCCL INFO" not in line:
            continue
        if host := _LINE_HOST.match(line.strip()):
            found.hosts.add(host[1])
        if m := _VIA.search(line):
            kind = _kind(m[3])
            found.kinds[kind] = found.kinds.get(kind, 0) + 1
            found.samples.setdefault(kind, line.strip())
        elif m := _ENV.search(line):
            found.env[m[1]] = m[2]
        elif m := _NETWORK.search(line):
            found.network = m[1]
        elif _IB_NONE.search(line):
            found.ib_absent = True
        elif m := _P2P_CHECK.search(line):
            found.p2p_support = int(m[1])
    return found


def transport_findings(found: NcclTransport, run_name: str = "nccl-tests") -> list[Finding]:
    """Name a run whose GPUs talked through host memory (P2P off or unavailable) or across nodes over TCP sockets;
    an "ok" finding says which transports a run used when nothing is wrong with them."""
    if not found.seen:
        return []
    shm, p2p = found.kinds.get("shm", 0), found.kinds.get("p2p", 0)
    socket, ib = found.kinds.get("net-socket", 0), found.kinds.get("net-ib", 0)
    results: list[Finding] = []
    disabled = found.p2p_disabled_by
    if disabled and not p2p:
        results.append(Finding(
            "nccl-p2p-disabled", "warning",
            f"{run_name}: P2P was turned off by {disabled}: GPU-to-GPU traffic inside the node went through host "
            f"memory ({shm} SHM connection(s)), so its bandwidth says nothing about NVLink or PCIe P2P",
            _evidence(found, "shm", disabled), "Rerun without " + disabled.split("=")[0] + " to measure the node."))
    elif shm and not p2p:
        why = " (NCCL found no P2P path: Check P2P Type ... 0)" if found.p2p_support == 0 else ""
        results.append(Finding(
            "nccl-no-p2p", "warning",
            f"{run_name}: no P2P between the GPUs{why}: every intra-node connection went through host memory "
            f"(SHM, {shm} connection(s)), not NVLink or PCIe P2P",
            _evidence(found, "shm", None),
            "`nvidia-smi topo -p2p r` and the CUDA sample p2pBandwidthLatencyTest say whether P2P works between "
            "these GPUs; GeForce cards and some virtual machines have none, NVLink/NVSwitch systems must."))
    if socket:
        why = " (NCCL_IB_DISABLE=1)" if found.env.get("NCCL_IB_DISABLE") == "1" else (
            " (no InfiniBand/RoCE device found)" if found.ib_absent else "")
        results.append(Finding(
            "nccl-net-socket", "warning",
            f"{run_name}: traffic between nodes went over TCP sockets (NET/Socket, {socket} connection(s)){why}, "
            "not InfiniBand/RoCE or a network plugin: its bandwidth is bounded by TCP on that NIC",
            _evidence(found, "net-socket", None),
            "For RDMA: install rdma-core/libibverbs and the NIC driver (or the cloud's NCCL net plugin, e.g. "
            "aws-ofi-nccl), unset NCCL_IB_DISABLE, and check `NET/IB : Using` in the NCCL_DEBUG=INFO output."))
    if not results:
        used = ", ".join(f"{kind} x{count}" for kind, count in sorted(found.kinds.items())) or "none shown"
        results.append(Finding("nccl-transport", "ok", f"{run_name}: transports used: {used}"
                               + (f"; network {found.network}" if found.network else ""),
                               _evidence(found, "p2p" if p2p else ("net-ib" if ib else next(iter(found.samples), "")),
                                         None), "None needed."))
    return results


def _evidence(found: NcclTransport, kind: str, setting: str | None) -> str:
    parts = [f"{setting} (NCCL INFO ... set by environment)"] if setting else []
    if sample := found.samples.get(kind):
        parts.append(sample[:200])
    if found.network:
        parts.append(f"Using network {found.network}")
    return "; ".join(parts) + f" [{_SOURCE}]"


# nccl-tests' own error lines (NVIDIA/nccl-tests@01d6761451d62e5b968bd8806c92898928e069ec src/common.h: CUDACHECK :31
# ``%s: Test CUDA failure %s:%d '%s'``, NCCLCHECK :44 ``%s: Test NCCL failure %s:%d '%s / %s'``, TESTCHECK :81
# `` .. %s pid %d: Test failure %s:%d``); NCCL's own ``NCCL WARN`` lines give the cause.
_TEST_FAILURE = re.compile(r"(\S+): Test (CUDA|NCCL) failure (\S+) '([^']*)")
_WARN = re.compile(r"NCCL WARN (.+)$")


def failure_findings(text: str, run_name: str = "nccl-tests") -> list[Finding]:
    """A run that stopped on a CUDA or NCCL error: no bandwidth was measured, and the error says why."""
    failure = _TEST_FAILURE.search(text)
    if failure is None:
        return []
    warns = [m[1].strip() for line in text.splitlines() if (m := _WARN.search(line))]
    cause = f"; NCCL WARN {warns[-1]}" if warns else ""
    return [Finding("nccl-tests-failed", "critical",
                    f"{run_name} stopped on host {failure[1]}: Test {failure[2]} failure at {failure[3]}: "
                    f"'{failure[4].strip(' /')}'{cause} - no bandwidth was measured",
                    failure[0][:200] + " (nccl-tests src/common.h CUDACHECK/NCCLCHECK)",
                    "Rerun with NCCL_DEBUG=INFO (and NCCL_DEBUG_SUBSYS=INIT,ENV); check that the NCCL release "
                    "supports the GPU (a new architecture needs a new NCCL), then `dcgmi diag -r 2` on the node.")]
