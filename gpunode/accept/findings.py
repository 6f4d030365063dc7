"""A node's acceptance document turned into findings: the runner's own (each naming its part), and the tools'
outputs read with gpunode's readers (nvbandwidth or the probe's copies as an NvbRun -> nvbandwidth_findings,
nccl-tests -> nccl_findings, `dcgmi diag -j` -> dcgmi_json), which hold the per-model references."""

from __future__ import annotations

from typing import Any

from gpunode.parsers.dcgmi_json import dcgmi_json_documents, dcgmi_json_results
from gpunode.parsers.model import Finding, Severity
from gpunode.parsers.nccl_findings import nccl_findings
from gpunode.parsers.nccl_tests import parse_nccl_tests
from gpunode.parsers.nvbandwidth import NvbMatrix, NvbRun, parse_nvbandwidth
from gpunode.parsers.nvbandwidth_findings import nvbandwidth_findings

# nvbandwidth's description lines of the three testcases the standard tier runs (gpunode/parsers/nvbandwidth.py
# cites them: testcases_ce.cpp:36, :50 and the read variant of :112)
_H2D = ("memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)", "host_to_device_memcpy_ce")
_D2H = ("memcpy CE CPU(row) <- GPU(column) bandwidth (GB/s)", "device_to_host_memcpy_ce")
_D2D = ("memcpy CE GPU(row) <- GPU(column) bandwidth (GB/s)", "device_to_device_memcpy_read_ce")
_NODE_PEER_IDS = {"bandwidth-low"}  # the node's own peer comparison: nvbandwidth_findings makes the same one


def part_label(part: dict[str, Any] | None) -> str | None:
    """"GPU 3 GPU-8f1... 00000000:07:00.0 link PCIe" from a node finding's part."""
    if not part:
        return None
    words = [f"GPU {part['index']}" if part.get("index") is not None else ""]
    words += [str(part[k]) for k in ("uuid", "bus_id") if part.get(k)]
    if part.get("link"):
        words.append(f"link {part['link']}")
    return " ".join(w for w in words if w) or None


def node_finding(raw: dict[str, Any], check: str) -> Finding:
    """One of the runner's findings."""
    given = raw.get("severity")
    severity: Severity = "critical" if given == "critical" else "ok" if given == "ok" else "warning"
    return Finding(str(raw.get("id", check)), severity, str(raw.get("summary", "")),
                   str(raw.get("evidence") or f"check {check}"), str(raw.get("remedy", "")),
                   part_label(raw.get("part")))


def probe_run(doc: dict[str, Any], probe: dict[str, Any]) -> NvbRun:
    """The probe's copies as nvbandwidth would have printed them: one row per host test, a GPU matrix for pairs."""
    devices = probe.get("devices") or []
    run = NvbRun(version="gpunode-probe", devices={int(d["index"]): str(d.get("name", "")) for d in devices},
                 bus_ids={int(d["index"]): str(d["bus_id"]) for d in devices if d.get("bus_id")})
    columns = sorted(run.devices)
    for (description, test), key in ((_H2D, "h2d_gbs"), (_D2H, "d2h_gbs")):
        values = {int(d["index"]): d.get(key) for d in devices}
        if any(v for v in values.values()):
            run.matrices.append(NvbMatrix(description, test, columns, [(0, [values.get(c) for c in columns])]))
    pairs = {(p["dst"], p["src"]): p.get("gbs") for p in probe.get("pairs") or []}
    if pairs:
        rows = [(r, [pairs.get((r, c)) for c in columns]) for r in columns]
        run.matrices.append(NvbMatrix(_D2D[0], _D2D[1], columns, rows))
    return run


def _model(doc: dict[str, Any], expect_model: str | None) -> str | None:
    return expect_model or next((g.get("name") for g in doc.get("gpus") or [] if g.get("name")), None)


def _bandwidth(check: dict[str, Any], doc: dict[str, Any], expect_model: str | None) -> list[Finding]:
    raw = (check.get("raw") or {}).get("nvbandwidth")
    if raw:
        return nvbandwidth_findings(parse_nvbandwidth(raw), _model(doc, expect_model))
    probe = (check.get("measurements") or {}).get("probe") or {}
    if not any(d.get("h2d_gbs") for d in probe.get("devices") or []):
        return []
    return nvbandwidth_findings(probe_run(doc, probe), _model(doc, expect_model))


def _dcgm(check: dict[str, Any], doc: dict[str, Any]) -> list[Finding] | None:
    """Per-GPU findings of a dcgmi diag -j document (None when the output holds none)."""
    docs, _ = dcgmi_json_documents((check.get("raw") or {}).get("dcgmi") or "")
    if not docs:
        return None
    gpus = {str(g.get("index")): g for g in doc.get("gpus") or []}
    found = []
    for result in (r for d in docs for r in dcgmi_json_results(d)):
        if result.status not in ("Fail", "Warn"):
            continue
        gpu = gpus.get(result.gpu or "")
        part = part_label({"index": result.gpu, **{k: gpu.get(k) for k in ("uuid", "bus_id")}} if gpu else
                          {"index": result.gpu} if result.gpu else None)
        fail = result.status == "Fail"
        found.append(Finding("dcgm-diag-failed" if fail else "dcgm-diag-warning", "critical" if fail else "warning",
                             f"{check['name']}: {result.test} {result.status} on {part or 'the node'}"
                             + (f": {result.warnings[0]}" if result.warnings else ""),
                             "; ".join(result.warnings + result.info)[:2000] or result.test,
                             "Read the test's message (`dcgmi diag -r 3 -v`): memory/ECC failures mean drain and "
                             "RMA the GPU, PCIe/NVLink ones seating or the baseboard.", part))
    return found


def _status_finding(check: dict[str, Any]) -> list[Finding]:
    status, name, reason = check.get("status"), check.get("name", "?"), check.get("reason", "")
    if status == "not-installed":
        return [Finding(f"accept-not-installed-{name}", "warning", f"{name}: not run, the tool is not installed",
                        reason, reason.split(": ", 1)[-1])]
    if status == "error":
        return [Finding(f"accept-error-{name}", "warning", f"{name}: could not judge", reason,
                        "Run the tool by hand on the node and read its output.")]
    return []


def check_findings(check: dict[str, Any], doc: dict[str, Any], expect_model: str | None) -> list[Finding]:
    """The findings of one check of the node document."""
    name = check.get("name", "")
    own = [node_finding(f, name) for f in check.get("findings") or []]
    if name == "bandwidth":
        own = [f for f in own if f.id not in _NODE_PEER_IDS] + _bandwidth(check, doc, expect_model)
    elif name == "nccl" and (raw := (check.get("raw") or {}).get("nccl-tests")):
        # the node's GPUs as nvidia-smi named them: nccl-tests ran across all of them (its rank lines may be cut)
        own += nccl_findings(parse_nccl_tests(raw), _model(doc, expect_model), len(doc.get("gpus") or []) or None)
    elif name.startswith("dcgm-diag-") and (dcgm := _dcgm(check, doc)) is not None:
        own = [f for f in own if not f.id.startswith("dcgm-diag-")] + dcgm
    return own + _status_finding(check)


def budget_finding(doc: dict[str, Any]) -> list[Finding]:
    """The checks the budget kept from running, said once."""
    skipped = [c for c in doc.get("checks") or [] if c.get("status") == "budget"]
    if not skipped:
        return []
    first = skipped[0]
    return [Finding("accept-budget", "warning",
                    f"the {doc.get('budget_s'):g} s budget stopped the {doc.get('tier')} tier before "
                    f"{first.get('name')}: {len(skipped)} check(s) not run ({', '.join(c['name'] for c in skipped)})",
                    first.get("reason", ""), "Give a larger --budget, or run the tier when the node is idle.")]


def document_findings(doc: dict[str, Any], expect_model: str | None = None) -> list[Finding]:
    """Every finding of a node document, check by check, then what the budget left out."""
    found: list[Finding] = []
    for check in doc.get("checks") or []:
        found += check_findings(check, doc, expect_model)
    # one finding once: the probe's checks (cuda, bandwidth, cuda-loop) each say a missing libcuda the same way
    unique: dict[tuple[str, str, str | None], Finding] = {}
    for finding in found:
        unique.setdefault((finding.id, finding.summary, finding.gpu), finding)
    return [*unique.values(), *budget_finding(doc)]
