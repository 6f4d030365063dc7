"""Plot bench results (run with a python that has matplotlib: the peers' venv). Usage: plot.py RESULTS.json OUT.png"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ORDER = ("floor", "gpunode", "ansible", "ansible-facts", "pyinfra")  # as bench/report.py's TOOL_ORDER
FLOOR_STYLE = {"color": "lightgrey", "hatch": "//", "edgecolor": "grey"}


def plot(results: dict, out: Path) -> None:
    """Bar charts of median wall time per tool, one panel per case, bars grouped by host count; then controller
    CPU per host in the converged case. The floor (one connection and one command per host) is grey, hatched."""
    summary = results["summary"]
    tools = sorted(dict.fromkeys(r["tool"] for r in summary), key=lambda t: ORDER.index(t) if t in ORDER else 99)
    counts = sorted({r["hosts"] for r in summary})
    cases = list(dict.fromkeys(r["case"] for r in summary))  # summary rows come in case order
    panels = [(case, "seconds", 1.0, "wall time (s)") for case in cases]
    if any("cpu_s_per_host" in r for r in summary if r["case"] == "converged"):
        panels.append(("converged", "cpu_s_per_host", 1000.0, "controller CPU per host (ms)"))
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4), squeeze=False)
    axes = axes[0]
    width = 0.8 / len(tools)
    for axis, (case, field, scale, label) in zip(axes, panels, strict=True):
        for i, tool in enumerate(tools):
            values = [next((r.get(field, 0.0) * scale for r in summary
                            if (r["hosts"], r["case"], r["tool"]) == (n, case, tool)), 0.0) for n in counts]
            axis.bar([x + i * width for x in range(len(counts))], values, width, label=tool,
                     **(FLOOR_STYLE if tool == "floor" else {}))
        axis.set_xticks([x + width * (len(tools) - 1) / 2 for x in range(len(counts))], [f"N={n}" for n in counts])
        title = {"first": "first apply", "converged": "converged re-run"}.get(case, case)
        axis.set_title(title if field == "seconds" else f"{title}: CPU per host")
        axis.set_ylabel(label)
    axes[0].legend()
    fig.suptitle("gpunode vs ansible-core vs pyinfra (same hosts, same work; floor: connect + one command)")
    fig.tight_layout()
    fig.savefig(out, dpi=100)


if __name__ == "__main__":
    plot(json.loads(Path(sys.argv[1]).read_text()), Path(sys.argv[2]))
