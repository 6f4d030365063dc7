"""`facts`: gather and print a host's facts (one remote exec per host)."""

from __future__ import annotations

import json

from gpunode.app.hosts import load_hosts
from gpunode.commands.common import HOST_ARGUMENT
from gpunode.connection import ConnectOptions, connect
from gpunode.errors import GpunodeError
from gpunode.facts import Facts, facts_script, parse_facts
from gpunode.report.console import make_console
from gpunode.report.text import line, literal


def gather(host, options: ConnectOptions) -> Facts:
    conn = connect(host, options)
    try:
        conn.open()
        result = conn.run("bash -s", stdin=facts_script(), label="facts.sh")
        if not result.ok:
            raise GpunodeError(f"facts.sh failed (exit {result.exit_code}): {result.tail()}", host=host.name,
                               step="facts", fix="check that bash exists on the host")
        return parse_facts(result.stdout)
    finally:
        conn.close()
        conn.transcript.close()


def show_facts(inventory: list[str], hosts: str | None, limit: str | None, as_json: bool,
               accept_new_host_keys: bool) -> int:
    _, selected = load_hosts(inventory, hosts, limit, HOST_ARGUMENT)
    options = ConnectOptions(accept_new_host_keys=accept_new_host_keys)
    collected, failed = {}, False
    for host in selected:
        try:
            collected[host.name] = gather(host, options).to_dict()
        except GpunodeError as exc:
            failed = True
            collected[host.name] = {"error": str(exc)}
    if as_json:
        print(json.dumps(collected if len(selected) > 1 else next(iter(collected.values())), indent=2, default=str))
    else:
        from rich.table import Table  # the tables only: --json never loads rich

        console = make_console()
        for name, facts in collected.items():
            table = Table(title=literal(name), show_header=False)
            if "error" in facts:
                console.print(line((f"{name}:", "bold red"), " ", facts["error"]))
                continue
            for key, value in parse_rows(facts):
                table.add_row(literal(key), literal(value))
            console.print(table)
    return 1 if failed else 0


def parse_rows(facts: dict) -> list[tuple[str, str]]:
    rows = []
    for section, value in facts.items():
        if section == "raw":
            continue
        if isinstance(value, dict):
            for key, inner in value.items():
                if inner not in (None, "", [], {}, ()):
                    rows.append((f"{section}.{key}", _short(inner)))
        elif value not in (None, "", [], {}, ()):
            rows.append((section, _short(value)))
    return rows


def _short(value) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else value
    return text if len(text) < 160 else text[:157] + "..."
