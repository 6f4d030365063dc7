"""`dcgmi diag -r N` result tables (each test's Pass / Fail / Warn / Skip, Error rows) and `dcgmi nvlink
--link-status` (each GPU's links Up / Down / Disabled), whole or as a pasted fragment; `dcgmi diag -j`
documents are read by dcgmi_json and reported with the same finding ids."""

from __future__ import annotations

import re

from gpunode.parsers.dcgmi_json import dcgmi_json_documents, dcgmi_json_results, is_dcgmi_json, result_detail
from gpunode.parsers.model import Finding, Severity

_HEADER = re.compile(r"^\|\s*Diagnostic\s*\|\s*Result\s*\|", re.M)
# "| GPU Memory | Pass - GPUs: 1, 2 |" and its continuation row "|  | Fail - GPU: 0 |" (the test name left blank)
_ROW = re.compile(r"^\|\s*(?P<test>[A-Za-z][^|]*?)?\s*\|\s*(?P<result>Pass|Fail|Warn|Skip)\b(?P<rest>[^|]*)\|", re.M)
_DETAIL = re.compile(r"^\|\s*(?P<kind>Error|Warning|Info)\s*\|\s*(?P<text>[^|]*?)\s*\|", re.M)
_CONTINUED = re.compile(r"^\|\s*\|\s*(?P<text>[^|]*?)\s*\|?\s*$")
_LINK_STATUS = re.compile(r"^\s*gpuId (?P<gpu>\d+):\s*\n\s*(?P<links>(?:[UDX_] ?)+)\s*$", re.M)
_GPU_LIST = re.compile(r"\bGPUs?: (?P<ids>\d+(?:, ?\d+)*)|\bGPU ?(?P<one>\d+)\b")
# "| GPU Device IDs Detected | 26b9, 26b9 |": one PCI device id per GPU the run saw, in GPU order
_DEVICE_IDS = re.compile(r"^\|\s*GPU Device IDs Detected\s*\|\s*(?P<ids>[0-9a-fA-F]{4}(?:,\s*[0-9a-fA-F]{4})*)", re.M)
_REMEDY = ("Read the failing test's message (`dcgmi diag -r 3 -v` for details): a memory/ECC failure means "
           "drain and RMA the GPU; PCIe/NVLink bandwidth failures point at seating, risers or the baseboard; "
           "a Denylist/driver failure at the software stack. Re-run after a GPU reset to confirm.")


def is_dcgmi_diag(text: str) -> bool:
    """True for a `dcgmi diag` result table (or rows of it), a `dcgmi diag -j` document or `dcgmi nvlink
    --link-status` output."""
    if '"DCGM' in text and is_dcgmi_json(text):
        return True
    if _LINK_STATUS.search(text):
        return True
    rows = _ROW.search(text) is not None or any(m.group("kind") == "Error" for m in _DETAIL.finditer(text))
    return rows and (_HEADER.search(text) is not None or "NVIDIA-SMI" not in text)


def dcgmi_gpus(text: str) -> set[str]:
    """The DCGM GPU ids a dcgmi output names ("gpuId 0", "GPUs: 1, 2", "GPU: 0", "GPU 3")."""
    docs, text = dcgmi_json_documents(text)
    ids = {m.group("gpu") for m in _LINK_STATUS.finditer(text)}
    for doc in docs:
        ids |= {n for r in dcgmi_json_results(doc) if r.gpu for n in r.gpu.split(",") if n.isdigit()}
    for match in _DEVICE_IDS.finditer(text):
        ids |= {str(n) for n in range(len(match.group("ids").split(",")))}
    for match in _GPU_LIST.finditer(_details_joined(text)):
        ids |= set(re.findall(r"\d+", match.group("ids") or match.group("one")))
    return {f"dcgm-gpu-{n}" for n in ids}


def _details_joined(text: str) -> str:
    """Result and detail cells with their wrapped continuation rows joined (DCGM wraps at the cell width)."""
    lines: list[str] = []
    for line in text.splitlines():
        continued = _CONTINUED.match(line)
        if continued and lines:
            lines[-1] += continued.group("text")
        else:
            lines.append(line)
    return "\n".join(lines)


def dcgmi_findings(text: str) -> tuple[int, list[Finding]]:
    """(tests read, findings): dcgm-diag-failed for failed tests or Error rows (critical), dcgm-diag-warning for
    warnings, nvlink-down for links DCGM reports Down."""
    docs, text = dcgmi_json_documents(text)
    joined = _details_joined(text)
    rows, test = [], ""
    for m in _ROW.finditer(text):
        test = m.group("test") or test
        rows.append((test, m.group("result"), m.group("rest").strip(" -")))
    for doc in docs:  # "GPU Memory: Fail - GPU: 0 (message)", as the table's rows read
        rows += [(r.test, r.status, result_detail(r)) for r in dcgmi_json_results(doc)]
    details = [(m.group("kind"), m.group("text")) for m in _DETAIL.finditer(joined) if m.group("text")]
    findings: list[Finding] = []
    checks: tuple[tuple[str, str, Severity], ...] = (("Fail", "dcgm-diag-failed", "critical"),
                                                     ("Warn", "dcgm-diag-warning", "warning"))
    for result, check_id, severity in checks:
        hit = [f"{name}: {result}{' - ' + rest if rest else ''}" for name, res, rest in rows if res == result]
        hit += [f"Error: {d}" for kind, d in details if kind == "Error" and result == "Fail"]
        if hit:
            findings.append(Finding(check_id, severity, f"DCGM diagnostics: {len(hit)} test(s) or error(s) "
                                    f"{'failed' if result == 'Fail' else 'warned'}",
                                    "; ".join(hit + [d for kind, d in details if kind != "Error"][:5]), _REMEDY))
    findings += _all_skipped(rows)
    findings += _link_findings(text)
    return len(rows) + len(list(_LINK_STATUS.finditer(text))), findings


def _all_skipped(rows: list[tuple[str, str, str]]) -> list[Finding]:
    """A run whose every result is Skip tested nothing: it proves nothing (no pass)."""
    if not rows or any(res != "Skip" for _, res, _ in rows):
        return []
    return [Finding("dcgm-diag-skipped", "warning", f"DCGM diagnostics: all {len(rows)} test result(s) were Skip: "
                    "nothing was tested - no verdict from this run",
                    "; ".join(f"{name}: Skip" for name, _, _ in rows[:8]),
                    "Run `dcgmi diag -r N -v` on the node to see why each test was skipped, then rerun the level that "
                    "tests this GPU.")]


def _link_findings(text: str) -> list[Finding]:
    down = [(m.group("gpu"), m.group("links").split().count("D")) for m in _LINK_STATUS.finditer(text)]
    down = [(gpu, n) for gpu, n in down if n]
    if not down:
        return []
    return [Finding(
        "nvlink-down", "critical", f"NVLink links down on {len(down)} GPU(s) (dcgmi nvlink --link-status)",
        "; ".join(f"gpuId {gpu}: {n} link(s) Down" for gpu, n in down),
        "Links DCGM reports Down carry no traffic: on NVSwitch systems check nvidia-fabricmanager runs and its "
        "log, that the fabric state is Completed (`nvidia-smi -q | grep -A2 Fabric`); then reset the GPUs or "
        "reboot, and run `dcgmi diag -r 3`; links that stay down point at the baseboard or NVLink bridge (RMA).",
        ", ".join(f"gpuId {gpu}" for gpu, _ in down))]
