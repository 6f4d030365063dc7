"""`gpunode accept`: run an acceptance tier on many hosts in parallel; one failing host never stops the others."""

from __future__ import annotations

import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gpunode.accept.findings import document_findings
from gpunode.accept.node import TIERS, AcceptRequest, run_on_host
from gpunode.accept.report import AcceptReport
from gpunode.app.hosts import load_hosts
from gpunode.commands.common import EXIT_FAILED, EXIT_OK, HOST_ARGUMENT
from gpunode.connection import ConnectOptions
from gpunode.errors import GpunodeError, UsageError
from gpunode.inventory import Host
from gpunode.report.console import make_console
from gpunode.report.text import line, say
from gpunode.verify import junit_xml

STATUS_STYLE = {"pass": "green", "warn": "yellow", "fail": "bold red", "timeout": "bold red", "budget": "yellow",
                "not-installed": "dim", "skip": "dim", "error": "yellow"}
VERDICT_STYLE = {"healthy": "green", "unhealthy": "bold red", "incomplete": "yellow", "unreachable": "bold red"}


def check_request(tier: str, budget: float | None) -> AcceptRequest:
    """The tier and budget checked before any host is contacted (a UsageError, exit 2, with the fix)."""
    if tier not in TIERS:
        raise UsageError(f"unknown tier {tier!r}", source="--tier", fix=f"one of {', '.join(TIERS)}")
    if budget is not None and budget <= 0:
        raise UsageError(f"the budget must be more than 0 seconds, got {budget:g}", source="--budget",
                         fix="e.g. --budget 60 (the quick tier's default)")
    return AcceptRequest(tier=tier, budget=budget)


def accept_host(host: Host, request: AcceptRequest, connect_options: ConnectOptions) -> AcceptReport:
    """One host's report: never raises (an unreachable host or an odd answer is that host's error)."""
    expect_gpus = request.expect_gpus if request.expect_gpus is not None else _int(host.vars.get("expect_gpus"))
    expect_model = request.expect_model or host.vars.get("expect_model")
    mine = AcceptRequest(request.tier, request.budget, expect_gpus, expect_model)
    try:
        doc = run_on_host(host, mine, connect_options)
        found = document_findings(doc, expect_model)
        for finding in found:  # the node names no inventory host: its remedies say `-l HOST`
            finding.remedy = finding.remedy.replace("-l HOST ", f"-l {host.name} ")
        return AcceptReport(host.name, doc, found)
    except GpunodeError as exc:
        return AcceptReport(host.name, error=str(exc))
    except Exception as exc:  # an odd host is that host's failure, never a traceback
        return AcceptReport(host.name, error=f"could not run the acceptance tier: {exc!r}; run `gpunode facts "
                                             f"{host.name}` and report it with that output")


def accept(inventory: list[str], target: str, request: AcceptRequest, forks: int, as_json: bool,
           junit: str | None, accept_new_host_keys: bool) -> int:
    """Exit 0 when every host passed the whole tier; 1 when one failed, was cut short or could not be reached."""
    hosts, limit = (None, target) if inventory else (target, None)
    _, selected = load_hosts(inventory, hosts, limit, HOST_ARGUMENT)
    options = ConnectOptions(accept_new_host_keys=accept_new_host_keys)
    with ThreadPoolExecutor(max_workers=max(1, min(forks, len(selected))), thread_name_prefix="accept") as pool:
        reports = list(pool.map(lambda h: accept_host(h, request, options), selected))
    data = [r.to_dict() for r in reports]
    if as_json:
        print(json.dumps(data if len(data) > 1 else data[0], indent=2))
    else:
        print_reports(data)
    if junit:
        Path(junit).write_text(junit_xml(data, "accept"))
        say("wrote JUnit XML: ", junit, stream=sys.stderr)
    return EXIT_OK if all(r.healthy for r in reports) else EXIT_FAILED


def print_reports(reports: list[dict]) -> None:
    """Per host: the verdict, each check with its time, and the findings with their fix."""
    console = make_console()
    for report in reports:
        verdict = str(report["verdict"])
        console.print(line((report["host"], "bold"), ": ", (verdict.upper(), VERDICT_STYLE.get(verdict, ""))))
        if "error" in report:
            console.print(line("  ", report["error"]))
            continue
        console.print(line(f"  {report['tier']} tier: {report['elapsed_s']:.1f} s of a {report['budget_s']:g} s "
                           f"budget, {len(report.get('gpus') or [])} GPU(s)"))
        for check in report.get("checks") or []:
            status = check["status"]
            console.print(line(f"  {check['name']:<12} ", (f"{status:<13}", STATUS_STYLE.get(status, "")),
                               f" {check.get('seconds', 0):6.2f} s", f"  {check['reason']}" if check.get("reason")
                               else ""))
        for finding in report["findings"]:
            if finding["severity"] == "ok":
                continue
            where = f" [{finding['gpu']}]" if finding.get("gpu") else ""
            console.print(line(f"    {finding['severity']} {finding['id']}{where}: {finding['summary']}"))
            if finding.get("remedy"):
                console.print(line(f"      fix: {finding['remedy']}"))


def _int(value: object) -> int | None:
    text = str(value).strip() if value is not None else ""
    return int(text) if text.isdigit() else None
