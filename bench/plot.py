"""Plot bench results (run with a python that has matplotlib: the peers' venv). Usage: plot.py RESULTS.json OUT.png"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def plot(results: dict, out: Path) -> None:
    """Bar charts of median wall time per tool: one panel per case, bars grouped by host count; the floor (one
    connection and one command per host) is the grey hatched bar."""
    summary = results["summary"]
    tools = list(dict.fromkeys(r["tool"] for r in summary))
    counts = sorted({r["hosts"] for r in summary})
    cases = list(dict.fromkeys(r["case"] for r in summary))  # summary rows come in case order
    fig, axes = plt.subplots(1, len(cases), figsize=(5.5 * len(cases), 4), squeeze=False)
    axes = axes[0]
    width = 0.8 / len(tools)
    for axis, case in zip(axes, cases, strict=True):
        for i, tool in enumerate(tools):
            values = [next((r["seconds"] for r in summary if (r["hosts"], r["case"], r["tool"]) == (n, case, tool)),
                           0.0) for n in counts]
            style = {"color": "lightgrey", "hatch": "//", "edgecolor": "grey"} if tool == "floor" else {}
            axis.bar([x + i * width for x in range(len(counts))], values, width, label=tool, **style)
        axis.set_xticks([x + width * (len(tools) - 1) / 2 for x in range(len(counts))], [f"N={n}" for n in counts])
        axis.set_title({"first": "first apply", "converged": "converged re-run"}.get(case, case))
        axis.set_ylabel("wall time (s)")
    axes[0].legend()
    fig.suptitle("gpunode vs ansible-core vs pyinfra (same hosts, same work; floor: connect + one command)")
    fig.tight_layout()
    fig.savefig(out, dpi=100)


if __name__ == "__main__":
    plot(json.loads(Path(sys.argv[1]).read_text()), Path(sys.argv[2]))
