"""Summaries of the bench runs: medians per (hosts, case, tool), ratios to gpunode and to the floor, the issue's
must-show checks evaluated from those rows, JSON and a markdown document."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from bench import mustshow

CASES = ("first", "converged")
TOOL_ORDER = ("floor", "gpunode", "ansible", "ansible-facts", "pyinfra")


def far_case(rtt_ms: float) -> str:
    """The name of the converged case run through the delay relay."""
    return f"converged-rtt{rtt_ms:g}ms"


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
            "remote_commands_all": [r["sshd_sessions"] for r in group],
            "logins": _median_int(r["sshd_logins"] for r in group),
            "own_exec_count": group[0].get("exec_count"),
            "changed": [r["changed"] for r in group],
            "ok": all(r["ok"] for r in group),
            "maxrss_mib": round(max(r["maxrss_kib"] for r in group) / 1024, 1),
            "tree_rss_mib": round(max(r["tree_rss_kib"] for r in group) / 1024, 1),
            **_cpu(group, hosts),
        })
    for row in rows:
        base = _find(rows, row["hosts"], row["case"], "gpunode")
        if base and base["seconds"]:
            row["time_vs_gpunode"] = round(row["seconds"] / base["seconds"], 2)
            if base["remote_commands"]:
                row["commands_vs_gpunode"] = round(row["remote_commands"] / base["remote_commands"], 2)
        floor = _find(rows, row["hosts"], row["case"], "floor")
        if floor and floor["seconds"]:
            row["time_vs_floor"] = round(row["seconds"] / floor["seconds"], 2)
    return rows


def _cpu(group: list[dict], hosts: int) -> dict:
    """Median controller CPU seconds (user + sys) of the runs, and per host; nothing for runs measured without."""
    if any("cpu_s" not in r for r in group):
        return {}
    cpu = statistics.median(r["cpu_s"] for r in group)
    return {"cpu_s": round(cpu, 3), "cpu_s_per_host": round(cpu / hosts, 4)}


def _find(rows: list[dict], hosts: int, case: str, tool: str) -> dict | None:
    return next((r for r in rows if (r["hosts"], r["case"], r["tool"]) == (hosts, case, tool)), None)


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
        "# gpunode vs ansible-core vs pyinfra (and the floor)", "",
        f"Measured {result['started']} on {result['machine']}. Versions: "
        + ", ".join(f"{k} {v}" for k, v in result["versions"].items()) + ".", "",
        "Work (same on every tool, every host seeded with the same files): packages jq + curl (apt lists refreshed "
        "when older than 1 h), one line in an existing config file, one fstab line (tmpfs, noauto), one key merged "
        "into an existing JSON file. `first` = fresh hosts; `converged` = the same hosts again (median of "
        f"{result['repeat']} runs); `converged-rtt{result.get('rtt_ms', 0):g}ms` = the same through a relay that "
        "adds that round-trip time to every SSH connection (a controller far from its cloud region; the lab has "
        "no netem). Remote commands = sshd `Starting session` lines on the hosts (LogLevel VERBOSE); "
        "memory = max RSS of the largest controller process (GNU time's, so not the bench's own) / peak RSS sum "
        "of the controller's process tree. "
        f"Load average before: {result.get('load_before', '?')}; after: {result.get('load_after', '?')}.", "",
        "| hosts | case | tool | wall s | × floor | × gpunode | CPU ms/host | remote cmds | logins | changed "
        "| max RSS MiB | tree RSS MiB |",
        "|---:|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|",
    ]
    for row in result["summary"]:
        cpu = row.get("cpu_s_per_host")
        lines.append(
            f"| {row['hosts']} | {row['case']} | {row['tool']} | {row['seconds']:.2f} | "
            f"{_ratio_cell(row.get('time_vs_floor'))} | {_ratio_cell(row.get('time_vs_gpunode'))} | "
            f"{'' if cpu is None else f'{cpu * 1000:.0f}'} | {row['remote_commands']} | {row['logins']} | "
            f"{','.join(str(c) for c in row['changed'])} | {row['maxrss_mib']} | {row['tree_rss_mib']} |"
        )
    lines += [
        "", "`× floor` = the tool's wall time divided by the floor's in the same case and N (the floor: one paramiko "
        "connection and one `true` per host, a thread per host, bench/floor.py); `× gpunode` = divided by gpunode's "
        "(> 1: gpunode is faster). CPU ms/host = controller CPU (user + sys, the tool's process and its waited-for "
        "children, from wait4) divided by the number of hosts (median run).", "",
        "## Must show (issue 21)", "",
    ]
    lines += [f"- **{c['status']}** {c['item']}: {c['detail']}" for c in result.get("must_show", [])]
    lines += [""]
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
    durations = result.get("durations_s")
    if durations:
        lines += ["", "## Durations", "", "Wall time of each part of this bench run (host start-up and teardown "
                  "included): " + ", ".join(f"{part} {seconds:.0f} s" for part, seconds in durations.items()) + "."]
    return "\n".join(lines) + "\n"


def _ratio_cell(ratio: float | None) -> str:
    return "" if ratio is None else f"{ratio:.2f}"


def write(result: dict, folder: Path) -> list[Path]:
    """results.json and results.md (latest), plus a dated copy of the JSON; the must-show checks are evaluated
    from the summary first."""
    folder.mkdir(parents=True, exist_ok=True)
    result["must_show"] = mustshow.evaluate(result.get("summary", []), far_case(result.get("rtt_ms", 50.0)))
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
