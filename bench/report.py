"""Summaries of the bench runs: medians per (hosts, case, tool), ratios to gpunode, JSON and a markdown table."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

CASES = ("first", "converged")
TOOL_ORDER = ("gpunode", "ansible", "ansible-facts", "pyinfra")


def summarize(runs: list[dict]) -> list[dict]:
    """One row per (hosts, case, tool): median wall time and the run's counts; ratio = tool time / gpunode time."""
    rows = []
    keys = sorted({(r["hosts"], r["case"], r["tool"]) for r in runs}, key=_order)
    for hosts, case, tool in keys:
        group = [r for r in runs if (r["hosts"], r["case"], r["tool"]) == (hosts, case, tool)]
        rows.append({
            "hosts": hosts, "case": case, "tool": tool, "runs": len(group),
            "seconds": round(statistics.median(r["seconds"] for r in group), 3),
            "seconds_all": [round(r["seconds"], 3) for r in group],
            "remote_commands": _median_int(r["sshd_sessions"] for r in group),
            "logins": _median_int(r["sshd_logins"] for r in group),
            "own_exec_count": group[0].get("exec_count"),
            "changed": [r["changed"] for r in group],
            "ok": all(r["ok"] for r in group),
            "maxrss_mib": round(max(r["maxrss_kib"] for r in group) / 1024, 1),
            "tree_rss_mib": round(max(r["tree_rss_kib"] for r in group) / 1024, 1),
        })
    for row in rows:
        base = next((r for r in rows if (r["hosts"], r["case"], r["tool"]) == (row["hosts"], row["case"], "gpunode")),
                    None)
        if base and base["seconds"]:
            row["time_vs_gpunode"] = round(row["seconds"] / base["seconds"], 2)
            if base["remote_commands"]:
                row["commands_vs_gpunode"] = round(row["remote_commands"] / base["remote_commands"], 2)
    return rows


def _order(key: tuple[int, str, str]) -> tuple[int, int, int, str]:
    hosts, case, tool = key
    return hosts, _case_index(case), TOOL_ORDER.index(tool) if tool in TOOL_ORDER else len(TOOL_ORDER), tool


def _case_index(case: str) -> int:
    return CASES.index(case) if case in CASES else len(CASES)  # converged-rttNms after the plain cases


def _median_int(values) -> int:
    return int(statistics.median(list(values)))


def markdown(result: dict) -> str:
    """The results as a short markdown document."""
    lines = [
        "# gpunode vs ansible-core vs pyinfra", "",
        f"Measured {result['started']} on {result['machine']}. Versions: "
        + ", ".join(f"{k} {v}" for k, v in result["versions"].items()) + ".", "",
        "Work (same on every tool, every host seeded with the same files): packages jq + curl (apt lists refreshed "
        "when older than 1 h), one line in an existing config file, one fstab line (tmpfs, noauto), one key merged "
        "into an existing JSON file. `first` = fresh hosts; `converged` = the same hosts again (median of "
        f"{result['repeat']} runs); `converged-rtt{result.get('rtt_ms', 0):g}ms` = the same through a relay that "
        "adds that round-trip time to every SSH connection (a controller far from its cloud region; the lab has "
        "no netem). Remote commands = sshd `Starting session` lines on the hosts (LogLevel VERBOSE); "
        "memory = ru_maxrss of the largest controller process / peak RSS sum of the controller's process tree. "
        f"Load average before: {result.get('load_before', '?')}; after: {result.get('load_after', '?')}.", "",
        "| hosts | case | tool | wall s | × gpunode | remote cmds | logins | changed | max RSS MiB | tree RSS MiB |",
        "|---:|---|---|---:|---:|---:|---:|---|---:|---:|",
    ]
    for row in result["summary"]:
        ratio = row.get("time_vs_gpunode")
        lines.append(
            f"| {row['hosts']} | {row['case']} | {row['tool']} | {row['seconds']:.2f} | "
            f"{'' if ratio is None else f'{ratio:.2f}'} | {row['remote_commands']} | {row['logins']} | "
            f"{','.join(str(c) for c in row['changed'])} | {row['maxrss_mib']} | {row['tree_rss_mib']} |"
        )
    lines += ["", "`× gpunode` = the tool's wall time divided by gpunode's (> 1: gpunode is faster).", ""]
    facts = result.get("facts")
    if facts:
        lines += [
            "## Facts gathering (one host)", "",
            f"- gpunode lock + facts exec (connection open): {facts['gpunode_facts_exec_s']['median']:.3f} s",
            f"- `gpunode facts HOST --json` end to end: {facts['gpunode_facts_cli_s']['median']:.3f} s",
            f"- `ansible HOST -m setup` end to end: {facts['ansible_setup_cli_s']['median']:.3f} s", "",
        ]
    parse = result.get("parse")
    if parse and "median_ms" in parse:
        lines += [
            "## verify-gpu parse time (nvidia-smi -q -x captures)", "",
            f"{parse['captures']} captures, best of {parse['repeat']}: min {parse['min_ms']} ms, median "
            f"{parse['median_ms']} ms, max {parse['max_ms']} ms (target < {parse['target_ms']:.0f} ms).", "",
        ]
    lines += ["## Notes", ""] + [f"- {note}" for note in result.get("notes", [])]
    return "\n".join(lines) + "\n"


def write(result: dict, folder: Path) -> list[Path]:
    """results.json and results.md (latest), plus a dated copy of the JSON."""
    folder.mkdir(parents=True, exist_ok=True)
    text = json.dumps(result, indent=2) + "\n"
    paths = [folder / "results.json", folder / f"results-{result['started'][:10]}.json", folder / "results.md"]
    paths[0].write_text(text)
    paths[1].write_text(text)
    paths[2].write_text(markdown(result))
    return paths


def ratio_lines(summary: list[dict]) -> list[str]:
    """One line per (hosts, case): each peer's time relative to gpunode's."""
    out = []
    for hosts, case in sorted({(r["hosts"], r["case"]) for r in summary}, key=lambda k: (k[0], _case_index(k[1]))):
        rows = [r for r in summary if (r["hosts"], r["case"]) == (hosts, case)]
        base = next((r for r in rows if r["tool"] == "gpunode"), None)
        if not base:
            continue
        peers = ", ".join(f"{r['tool']} {r['seconds']:.2f}s ({r.get('time_vs_gpunode', 0):.1f}x, "
                          f"{r['remote_commands']} cmds)" for r in rows if r["tool"] != "gpunode")
        out.append(f"N={hosts:<3} {case:<9} gpunode {base['seconds']:.2f}s ({base['remote_commands']} cmds) | {peers}")
    return out
