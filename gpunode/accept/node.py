"""Running scripts/accept_node.py on one host: shipped in the command's stdin, run with the host's python3, its
JSON read back."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass

from gpunode.connection import ConnectOptions, connect, q
from gpunode.errors import GpunodeError
from gpunode.inventory import Host
from gpunode.scripts import script_text

TIERS = ("quick", "standard", "burn-in")
DEFAULT_BUDGET = {"quick": 60.0, "standard": 1200.0, "burn-in": 10800.0}  # as accept_node.py's DEFAULT_BUDGET
SSH_SLACK_S = 120.0  # beyond the budget: the node enforces the budget, the SSH timeout only catches a lost node
NO_PYTHON = 127


@dataclass(frozen=True)
class AcceptRequest:
    """What each host runs: the tier, its budget, and what the node should have."""

    tier: str = "quick"
    budget: float | None = None
    expect_gpus: int | None = None
    expect_model: str | None = None

    @property
    def budget_s(self) -> float:
        return self.budget if self.budget is not None else DEFAULT_BUDGET[self.tier]

    def node_args(self) -> list[str]:
        """accept_node.py's options (the node's /etc/gpunode/accept.json is not read: the controller decides)."""
        args = ["--format", "json", "--config", "", "--tier", self.tier, "--budget", f"{self.budget_s:g}"]
        if self.expect_gpus is not None:
            args += ["--expect-gpus", str(self.expect_gpus)]
        if self.expect_model:
            args += ["--expect-model", self.expect_model]
        return args


def remote_script(request: AcceptRequest) -> str:
    """The bash script sent as stdin: writes accept_node.py to a private temporary folder, runs it, removes it."""
    payload = base64.encodebytes(script_text("accept_node.py").encode("utf-8")).decode("ascii")
    args = " ".join(q(a) for a in request.node_args())
    return (
        "d=$(mktemp -d \"${TMPDIR:-/tmp}/gpunode-accept.XXXXXX\") || exit 3\n"
        "trap 'rm -rf \"$d\"' EXIT\n"
        "base64 -d > \"$d/accept.py\" <<'GPUNODE_ACCEPT_EOF'\n"
        f"{payload}GPUNODE_ACCEPT_EOF\n"
        f"py=$(command -v python3) || {{ echo 'gpunode accept: no python3 on this host' >&2; exit {NO_PYTHON}; }}\n"
        f"\"$py\" \"$d/accept.py\" {args}\n"
    )


def read_document(stdout: str, stderr: str, exit_code: int, host: str) -> dict:
    """The node's JSON document; a GpunodeError naming the cause when there is none."""
    if exit_code == NO_PYTHON:
        raise GpunodeError("no python3 on this host: the acceptance runner needs Python 3.6 or later",
                           host=host, step="accept", fix="install python3 with the distribution's package manager")
    start = stdout.find("{")
    try:
        doc = json.loads(stdout[start:]) if start >= 0 else None
    except ValueError:
        doc = None
    if not isinstance(doc, dict) or doc.get("kind") != "gpunode-accept":
        tail = (stderr.strip() or stdout.strip())[-500:] or "no output"
        raise GpunodeError(f"the acceptance runner gave no result (exit {exit_code}): {tail}", host=host,
                           step="accept", fix="run it by hand: python3 accept_node.py --format text (scripts/ in "
                           "gpunode) and report its output")
    return doc


def run_on_host(host: Host, request: AcceptRequest, connect_options: ConnectOptions) -> dict:
    """The node document of one host (raises GpunodeError when unreachable or when the runner gave nothing)."""
    conn = connect(host, connect_options)
    try:
        conn.open()
        result = conn.run("bash -s", stdin=remote_script(request), timeout=request.budget_s + SSH_SLACK_S,
                          label=f"accept {request.tier}", sudo=False)
        return read_document(result.stdout, result.stderr, result.exit_code, host.name)
    finally:
        conn.close()
        conn.transcript.close()
