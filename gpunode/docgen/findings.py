"""docs/findings.md: findings made in code (read from the source, not run) and the catalogues."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

from gpunode.docgen.where import GENERATED, REPO
from gpunode.markdown import cell, table

ID = re.compile(r"^[a-z0-9]+(?:-[a-z0-9…]+)+$")
HOLE = "…"
# Finding(id, severity, summary, evidence, remedy, gpu) and the checks' helper _finding(id, severity, summary,
# notes, remedy, hits): the same positions
POSITIONS = {"id": 0, "severity": 1, "summary": 2, "remedy": 4}


def coded_findings(repo: Path) -> list[list[str]]:
    """One row per finding id made in each module of gpunode/ (id, severity, summary, fix, file), sorted by id."""
    rows: dict[tuple[str, str], list[str]] = {}
    for path in sorted((repo / "gpunode").rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        if "Finding(" not in source and "_finding(" not in source:
            continue
        tree = ast.parse(source)
        constants = _module_strings(tree)
        where = f"`{path.relative_to(repo / 'gpunode')}`"
        for function in ast.walk(tree):
            if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                for call, bindings in _calls(function):
                    for row in _rows(call, {**constants, **bindings}):
                        if (row[0], where) not in rows:
                            rows[(row[0], where)] = [f"`{row[0]}`", *(cell(c) for c in row[1:]), where]
    return [rows[key] for key in sorted(rows)]


def _module_strings(tree: ast.Module) -> dict[str, str]:
    """Module-level names bound to text (remedies kept in constants)."""
    found: dict[str, str] = {}
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else (
            node.target if isinstance(node, ast.AnnAssign) else None)
        if isinstance(target, ast.Name) and getattr(node, "value", None) is not None:
            text = render(node.value, found)  # type: ignore[arg-type]
            if text.strip(HOLE):
                found[target.id] = text
    return found


def _calls(function: ast.AST) -> list[tuple[ast.Call, dict[str, str]]]:
    """The Finding/_finding calls of one function, each with the names a `for` loop over literal tuples binds
    (`for result, check_id, severity in (("Fail", "dcgm-diag-failed", "critical"), ...)`: one call per tuple)."""
    local = {n.targets[0].id: n.value for n in ast.walk(function) if isinstance(n, ast.Assign)
             and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)}
    found: list[tuple[ast.Call, dict[str, str]]] = []
    in_loops: set[int] = set()
    for loop in ast.walk(function):
        if isinstance(loop, ast.For) and isinstance(loop.target, ast.Tuple):
            calls = [c for c in ast.walk(loop) if isinstance(c, ast.Call) and _is_finding(c)]
            in_loops |= {id(c) for c in calls}
            found += [(c, bindings) for bindings in _loop_bindings(loop, local) for c in calls]
    found += [(c, {}) for c in ast.walk(function)
              if isinstance(c, ast.Call) and _is_finding(c) and id(c) not in in_loops]
    return found


def _loop_bindings(loop: ast.For, local: dict[str, ast.expr]) -> list[dict[str, str]]:
    """name -> text for each literal tuple the loop goes over (its iterable written out, or a local name of one)."""
    items = local.get(loop.iter.id) if isinstance(loop.iter, ast.Name) else loop.iter
    names = [t.id if isinstance(t, ast.Name) else "" for t in getattr(loop.target, "elts", [])]
    found = []
    for item in getattr(items, "elts", []):
        values = [e.value if isinstance(e, ast.Constant) else None for e in getattr(item, "elts", [])]
        found.append({n: v for n, v in zip(names, values, strict=False) if n and isinstance(v, str)})
    return found


def _is_finding(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("Finding", "_finding")


def _rows(call: ast.Call, names: dict[str, str]) -> list[list[str]]:
    """One row, or one per id when the id is chosen (`"nfs-mount-ok" if ok else f"nfs-mount-{status}"`)."""
    parts = {}
    for key, position in POSITIONS.items():
        node = next((k.value for k in call.keywords if k.arg == key), None)
        if node is None and position < len(call.args):
            node = call.args[position]
        parts[key] = render(node, names) if node is not None else ""
    fix = parts["remedy"] if parts["remedy"].strip(HOLE + " ()") else "depends on what was found"
    summary = parts["summary"] if parts["summary"].strip(HOLE + " ()") else "depends on what was found"
    severity = parts["severity"] if parts["severity"].strip(HOLE) else "depends on what was found"
    # an id taken from elsewhere (a catalogue entry, another finding) gives no row
    return [[i, severity, summary, fix] for i in parts["id"].split(" or ") if ID.match(i)]


def render(node: ast.expr, names: dict[str, str]) -> str:
    """An expression as text: literal parts kept, computed parts as `…`; severities `warning or critical`."""
    if isinstance(node, ast.Constant):
        return str(node.value) if isinstance(node.value, str) else HOLE
    if isinstance(node, ast.JoinedStr):
        return _squeeze("".join(render(v, names) for v in node.values))
    if isinstance(node, ast.FormattedValue):
        return render(node.value, names) if isinstance(node.value, ast.Name) and node.value.id in names else HOLE
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _squeeze(render(node.left, names) + render(node.right, names))
    if isinstance(node, ast.Name):
        return names.get(node.id, HOLE)
    if isinstance(node, ast.IfExp):  # either value: both named, or the one that is not empty
        return " or ".join(dict.fromkeys(t for t in (render(node.body, names), render(node.orelse, names)) if t))
    return HOLE


def _squeeze(text: str) -> str:
    return re.sub(f"{HOLE}+", HOLE, text)


def signature_rows() -> list[list[str]]:
    """The error messages gpunode recognises (parsers/errors_text.py, parsers/catalogs/kernel_conditions.py)."""
    from gpunode.parsers.catalogs.kernel_conditions import CONDITIONS
    from gpunode.parsers.errors_text import SIGNATURES

    rows: dict[tuple[str, str, str], list[str]] = {}
    entries: list[Any] = [*SIGNATURES, *CONDITIONS]
    for entry in entries:
        context = getattr(entry, "context", "kernel")
        key = (entry.id, context, entry.summary)
        rows.setdefault(key, [f"`{entry.id}`", context, entry.severity, cell(entry.summary), cell(entry.remedy)])
    return [rows[key] for key in sorted(rows)]


def catalogue_rows() -> tuple[list[list[str]], str]:
    """The message catalogue (parsers/catalogs/messages/*.yaml): one row per program and finding, and a line
    saying how many entries from how many programs it holds."""
    from gpunode.parsers.catalogs.messages import load_catalogue
    from gpunode.parsers.errors_text import inherited_fix

    entries = load_catalogue()
    rows: dict[tuple[str, str], list[str]] = {}
    counts: dict[tuple[str, str], int] = {}
    for entry in entries:
        key = (entry.finding, entry.program)
        counts[key] = counts.get(key, 0) + 1
        fix = entry.fix or inherited_fix(entry.finding)
        rows.setdefault(key, [f"`{entry.finding}`", entry.program, entry.vendor, entry.severity,
                              cell(entry.summary), cell(fix), ""])
    for key, row in rows.items():
        row[-1] = str(counts[key])
    programs = sorted({entry.program for entry in entries})
    total = f"{len(entries)} format strings from {len(programs)} programs ({', '.join(programs)})."
    return [rows[key] for key in sorted(rows)], total


def xid_rows() -> list[list[str]]:
    from gpunode.parsers.catalogs.xid import XID_MEANINGS

    return [[f"`xid-{code}`", cell(f"{info.mnemonic}: {info.name}"), info.severity, cell(info.meaning),
             cell(info.remedy)] for code, info in sorted(XID_MEANINGS.items())]


# ---- ---------------------------------------------------------------------------------------------------

def findings_md() -> str:
    out = [GENERATED, "", "# Findings", "",
           "What `verify-gpu` and `diagnose` report: each finding has an id, a severity (ok, warning, critical), "
           "the quoted evidence and a fix. The id is stable: alert on it. Read from the checks (`gpunode/verify/"
           "checks/`, `gpunode/parsers/`) and the catalogues (`gpunode/parsers/errors_text.py`, "
           "`gpunode/parsers/catalogs/`). A summary or fix that depends on the host shows its variable part as `…`.",
           "", "## Checks", ""]
    out += table(["id", "severity", "what it means", "fix", "where"], coded_findings(REPO))
    out += ["", "## Error messages (nvidia-smi, NVML, the container runtime, the kernel)", "",
            "A captured output or log that holds one of these messages gives the finding of the same id.", ""]
    out += table(["id", "seen in", "severity", "what it means", "fix"], signature_rows())
    rows, total = catalogue_rows()
    out += ["", "## Message catalogue (format strings of the programs that print them)", "",
            "Read from each program's source at a pinned commit or its documented error-string table "
            "(`gpunode/parsers/catalogs/messages/<program>.yaml`, each entry with its file and line): a line made "
            "from one of these format strings gives the finding, unless a message above reads the same line. "
            "Entries of other vendors than NVIDIA give no finding: they mark a line as not NVIDIA's; dkms's give "
            "theirs when the capture names an NVIDIA module as DKMS does (`nvidia/<version>`, /var/lib/dkms/nvidia). "
            + total, ""]
    out += table(["id", "program", "vendor", "severity", "what it means", "fix", "formats"], rows)
    out += ["", "## Xid errors", "",
            "An `NVRM: Xid` line in the kernel log gives the finding `xid-<code>`. gpunode's own entries (below) "
            "come first; any other code is read from NVIDIA's Xid catalogue "
            "(`gpunode/parsers/catalogs/xid_nvidia.py`, its immediate and investigatory actions).", ""]
    out += table(["id", "name", "severity", "meaning", "fix"], xid_rows())
    return "\n".join(out) + "\n"
