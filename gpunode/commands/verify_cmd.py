"""`verify-gpu`, `diagnose` and `collect`: is this node's GPU stack healthy, and why not."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

from gpunode.app.hosts import load_hosts
from gpunode.app.verify import VerifyOptions, check_host
from gpunode.commands.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, HOST_ARGUMENT
from gpunode.connection import ConnectOptions, connect
from gpunode.errors import GpunodeError, UsageError
from gpunode.facts import facts_subshell
from gpunode.report.console import make_console
from gpunode.report.text import line, say
from gpunode.scripts import gpu_evidence_script, script_text
from gpunode.verify import Expectations, diagnose_files, junit_xml
from gpunode.verify.report import HostReport


def verify_gpu(inventory: list[str], target: str, options: VerifyOptions, as_json: bool, junit: str | None,
               accept_new_host_keys: bool) -> int:
    """Exit 0 when every host is healthy, 1 when one is unhealthy or could not be checked (the exit code rule of
    every command: docs/guide.md, "Exit codes"); 2 only for bad input, before any host is contacted."""
    hosts, limit = (None, target) if inventory else (target, None)
    _, selected = load_hosts(inventory, hosts, limit, HOST_ARGUMENT)
    connect_options = ConnectOptions(accept_new_host_keys=accept_new_host_keys)
    reports: list[HostReport] = []
    for host in selected:
        try:
            reports.append(check_host(host, options, connect_options))
        except GpunodeError as exc:
            reports.append(HostReport(host.name, error=str(exc)))
        except Exception as exc:  # a facts parse error or an odd host is that host's failure, never a traceback
            reports.append(HostReport(host.name, error=(
                f"could not check this host: {exc!r}; run `gpunode facts {host.name}` to see what it returns and "
                "report it with that output")))
    data = [report.to_dict() for report in reports]
    if as_json:
        print(json.dumps(data if len(data) > 1 else data[0], indent=2))
    else:
        _print_reports(data)
    if junit:
        Path(junit).write_text(junit_xml(data))
        say("wrote JUnit XML: ", junit, stream=sys.stderr)  # stdout may be JSON a script reads
    return EXIT_OK if all(r.healthy for r in reports) else EXIT_FAILED


SEVERITY_STYLE = {"critical": "bold red", "warning": "yellow", "ok": "green"}


def _print_reports(reports: list[dict]) -> None:
    console = make_console()
    for report in reports:
        if "error" in report:  # never reached: no health verdict
            console.print(line((report["host"], "bold"), ": ", ("UNREACHABLE", "bold red")))
            console.print(line("  ", report["error"]))
            continue
        state = {True: ("healthy", "green"), False: ("NOT healthy", "bold red")}.get(
            report["healthy"], ("verdict unknown", "bold red"))
        console.print(line((report["host"], "bold"), ": ", state))
        for gpu in report["gpus"]:
            console.print(line(f"  GPU {gpu.get('index')}: {gpu.get('name')} {gpu.get('pci_bus_id')} "
                               f"driver {gpu.get('driver_version')} CUDA {gpu.get('cuda_version')}"))
        for finding in report["findings"]:
            style = SEVERITY_STYLE.get(finding["severity"], "")
            console.print(line("  ", (f"{finding['severity']:8}", style), f" {finding['id']}: {finding['summary']}"))
            if finding.get("evidence"):
                console.print(line(f"           evidence: {short_evidence(finding['evidence'])}"))
            if finding.get("remedy") and finding["severity"] != "ok":
                console.print(line(f"           remedy: {finding['remedy']}"))


def short_evidence(text: str, limit: int = 200) -> str:
    """Evidence for the console: its first line, cut at a word within `limit` characters, saying when something
    was left out (the JSON report keeps it whole)."""
    lines = text.strip().splitlines() or [""]
    first = lines[0].rstrip()
    cut = len(first) > limit
    if cut:
        head = first[:limit + 1]
        space = head.rstrip().rfind(" ")
        first = (head[:space] if space > limit // 2 else first[:limit]).rstrip(" ,;:")
    more = len(lines) - 1
    if not cut and not more:
        return first
    left = f"{len(text.strip()) - len(first)} more characters" + (f", {more} more line{'s' * (more > 1)}"
                                                                   if more else "")
    return f"{first} ... [cut: {left}; all of it in --json]"


def diagnose(paths: list[str], as_json: bool, expectations: Expectations) -> int:
    """Offline analysis of saved outputs; exit 0 healthy, 1 a critical finding, 2 input not understood."""
    if not paths:
        raise UsageError("no file given: diagnose needs at least one capture",
                         fix="gpunode diagnose FILE... (nvidia-smi / lspci -nn / dmesg / journalctl -k output, "
                             "captured error text, a folder or a `gpunode collect` bundle)")
    result = diagnose_files([Path(p) for p in paths], expectations)
    print(json.dumps(result.to_dict(), indent=2) if as_json else result.render_text())
    return {True: EXIT_OK, False: EXIT_FAILED, None: EXIT_USAGE}[result.healthy]


def collect(inventory: list[str], target: str, output: str | None, accept_new_host_keys: bool) -> list[Path]:
    """Write a support bundle (tar.gz) per host; `gpunode diagnose` reads its unpacked files."""
    hosts, limit = (None, target) if inventory else (target, None)
    _, selected = load_hosts(inventory, hosts, limit, HOST_ARGUMENT)
    written = []
    for host in selected:
        conn = connect(host, ConnectOptions(accept_new_host_keys=accept_new_host_keys))
        try:
            conn.open()
            evidence = "gpunode_evidence() {\n" + facts_subshell() + gpu_evidence_script() + "}\n"
            result = conn.run("bash -s", stdin=evidence + script_text("collect.sh"), label="collect bundle")
            if not result.ok:
                raise GpunodeError(f"collecting failed: {result.tail()}", host=host.name, step="collect")
            path = Path(output or ".") / f"gpunode-collect-{host.name}.tar.gz"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(base64.b64decode(result.stdout.strip()))
            written.append(path)
        finally:
            conn.close()
            conn.transcript.close()
    return written
