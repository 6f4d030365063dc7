"""gpunode vs ansible-playbook vs pyinfra on the same lab hosts doing the same work.

Usage: python -m bench.run [--hosts 1,8] [--repeat 3] [--rtt-ms 50] [--tools gpunode,ansible,pyinfra]
For each host count and tool: fresh hosts, a first apply, then `repeat` converged re-runs (and as many through
a relay that adds --rtt-ms of round-trip time, like a controller far from its cloud region); every run is a
subprocess (wall time, memory), remote commands are counted in the hosts' sshd logs, and the end state of every
host is checked. Then facts gathering and verify-gpu parse times. Needs root (the lab).
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from bench import hosts as bench_hosts
from bench import micro, report
from bench.latency import delayed
from bench.measure import run_measured
from bench.peers import ensure_peers, plotting_python, versions
from bench.tools import Ansible, Gpunode, Pyinfra, Tool
from bench.workload import Access, BenchHost, check_host_state, write_gpunode
from gpunode.lab.lab import Lab

BENCH = Path(__file__).resolve().parent
DEFAULT_TAG, DEFAULT_SUBNET = "bench7", "10.231.71.0/24"
INDEX_BLOCK = 40  # host indices per tool: tool i uses i*40+1 ... (addresses .11 to .250)
NOTES = [
    "Every tool runs cold: a new process, new SSH connections (Ansible gets its own ControlPath folder per run "
    "and its master connections are closed after it), hosts in parallel with forks/--parallel = number of hosts.",
    "Ansible is tuned: ANSIBLE_PIPELINING=True, ansible_python_interpreter pinned (no discovery), "
    "gather_facts: false (no task needs facts). `ansible-facts` is the same play with Ansible's default fact "
    "gathering, run on the hosts Ansible converged (so it has no `first` row).",
    "JSON merge: gpunode has no generic JSON step, so a `command` (python3 json load/update/replace) guarded by "
    "`unless` (python3 checks the key; runs in the batched probe); Ansible: `slurp` + `copy` with content "
    "`from_json | combine | to_nice_json`; pyinfra: the `FileContents` fact, merged in the deploy, `files.put`.",
    "gpunode gathers its facts (about 60 values, one exec, holding the run lock) on every run; Ansible here "
    "gathers none; pyinfra gathers the facts its operations need, one command each.",
    "The hosts run on the same 2 cores as the controller: host-side work (apt, python modules) competes with "
    "the controller, which makes the first apply mostly a measure of apt.",
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", default="1,8", help="host counts, comma-separated (e.g. 1,8,32)")
    parser.add_argument("--repeat", type=int, default=3, help="converged re-runs per tool (median reported)")
    parser.add_argument("--tools", default="gpunode,ansible,pyinfra")
    parser.add_argument("--rtt-ms", type=float, default=50.0,
                        help="round-trip time added for the far converged case (0: skip it)")
    parser.add_argument("--no-ansible-facts", action="store_true", help="skip the ansible default-facts variant")
    parser.add_argument("--no-micro", action="store_true", help="skip facts and parse timings")
    parser.add_argument("--output", type=Path, default=BENCH / "results")
    parser.add_argument("--tag", default=DEFAULT_TAG)
    parser.add_argument("--subnet", default=DEFAULT_SUBNET)
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("bench: the lab needs root", file=sys.stderr)
        return 2
    counts = [int(n) for n in args.hosts.split(",") if n.strip()]
    if max(counts) >= INDEX_BLOCK:
        print(f"bench: at most {INDEX_BLOCK - 1} hosts per tool", file=sys.stderr)
        return 2
    bin_dir = ensure_peers()
    tools: list[Tool] = [{"gpunode": Gpunode, "ansible": lambda: Ansible(bin_dir), "pyinfra": lambda: Pyinfra(bin_dir)}
                         [name.strip()]() for name in args.tools.split(",")]
    result = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S"), "machine": _machine(), "versions": versions(bin_dir),
        "hosts": counts, "repeat": args.repeat, "rtt_ms": args.rtt_ms, "tools": [t.name for t in tools],
        "notes": NOTES, "load_before": _load(), "runs": [],
    }
    work = Path(f"/tmp/gpunode-bench-{os.getpid()}")
    lab = Lab(args.tag, args.subnet)
    lab.down()  # leftovers of an interrupted run
    try:
        for count in counts:
            for position, tool in enumerate(tools):
                result["runs"] += _bench_tool(lab, tool, position, count, args, bin_dir, work)
            result["summary"] = report.summarize(result["runs"])
            report.write(result, args.output)  # partial results survive an interrupted long run
        if not args.no_micro:
            result["parse"] = micro.parse_times()
            result["facts"] = _facts(lab, bin_dir, work)
    finally:
        lab.down()
    result["load_after"] = _load()
    result["summary"] = report.summarize(result["runs"])
    paths = report.write(result, args.output)
    _plot(bin_dir, paths[0], args.output / "results.png")
    print("\n".join(report.ratio_lines(result["summary"])))
    print(f"results: {', '.join(str(p) for p in paths)}")
    return 0 if all(r["ok"] for r in result["runs"]) else 1


def _bench_tool(lab: Lab, tool: Tool, position: int, count: int, args: argparse.Namespace, bin_dir: Path,
                work: Path) -> list[dict]:
    runs = []
    with bench_hosts.fresh_hosts(lab, position * INDEX_BLOCK + 1, count) as hosts:
        folder = work / f"{tool.name}-{count}"
        folder.mkdir(parents=True, exist_ok=True)
        targets = bench_hosts.bench_hosts(hosts)
        tool.prepare(folder, targets, bench_hosts.access(lab))
        runs.append(_measure(tool, folder, hosts, count, "first", "first"))
        problems = [f"{h.name}: {p}" for h in hosts for p in check_host_state(h.root)]
        if problems:
            runs[-1]["ok"] = False
            runs[-1]["problems"] = problems
        variants = [tool] + ([Ansible(bin_dir, gather_facts=True)]
                             if isinstance(tool, Ansible) and not args.no_ansible_facts else [])
        for variant in variants:
            variant.prepare(folder, targets, bench_hosts.access(lab))
            for i in range(args.repeat):
                runs.append(_measure(variant, folder, hosts, count, "converged", f"converged{i}"))
        if args.rtt_ms:
            runs += _far_runs(lab, tool, hosts, count, args, folder)
    return runs


def _far_runs(lab: Lab, tool: Tool, hosts: list, count: int, args: argparse.Namespace, folder: Path) -> list[dict]:
    """Converged re-runs through a relay that adds args.rtt_ms of round-trip time to every SSH connection."""
    gateway = lab.network.gateway
    with delayed(gateway, {h.index: h.address for h in hosts}, args.rtt_ms) as relay:
        far_folder = folder / "far"
        far_folder.mkdir(exist_ok=True)
        known = far_folder / "known_hosts"
        known.write_text("".join(f"[{gateway}]:{relay.port(h.index)} {lab.host_public_key(h)}\n" for h in hosts))
        near = bench_hosts.access(lab)
        tool.prepare(far_folder, [BenchHost(h.name, gateway, relay.port(h.index)) for h in hosts],
                     Access(near.user, near.key, str(known)))
        return [_measure(tool, far_folder, hosts, count, far_case(args.rtt_ms), f"far{i}") for i in range(args.repeat)]


def far_case(rtt_ms: float) -> str:
    return f"converged-rtt{rtt_ms:g}ms"


def _measure(tool: Tool, folder: Path, hosts: list, count: int, case: str, run_id: str) -> dict:
    invocation = tool.invocation(folder, count, run_id)
    since = time.time()
    measured = run_measured(invocation.argv, env=invocation.env, cwd=folder, log=folder / f"{tool.name}-{run_id}.log")
    tool.finish(invocation)
    outcome = tool.outcome(invocation, measured.exit_code, measured.output)
    sshd = bench_hosts.sshd_counts(hosts, since)
    ok = outcome.ok and (case == "first" or outcome.changed == 0)
    row = {"tool": tool.name, "hosts": count, "case": case, "run": run_id, "seconds": round(measured.seconds, 3),
           "exit_code": measured.exit_code, "ok": ok, "changed": outcome.changed, "exec_count": outcome.exec_count,
           "sshd_sessions": sshd.sessions, "sshd_logins": sshd.logins, "maxrss_kib": measured.maxrss_kib,
           "tree_rss_kib": measured.tree_rss_kib}
    if not ok:
        row["output_tail"] = measured.output[-3000:]
    print(f"  {tool.name:<14} N={count:<3} {run_id:<11} {measured.seconds:7.2f}s  exit {measured.exit_code}  "
          f"changed {outcome.changed}  cmds {sshd.sessions:<4} logins {sshd.logins:<3} "
          f"rss {measured.maxrss_kib // 1024}/{measured.tree_rss_kib // 1024} MiB{'' if ok else '  NOT OK'}",
          flush=True)
    return row


def _facts(lab: Lab, bin_dir: Path, work: Path) -> dict:
    with bench_hosts.fresh_hosts(lab, 3 * INDEX_BLOCK + 1, 1) as hosts:
        folder = work / "facts"
        folder.mkdir(parents=True, exist_ok=True)
        target = bench_hosts.bench_hosts(hosts)[0]
        access = bench_hosts.access(lab)
        _, inventory = write_gpunode(folder, [target], access)
        return micro.facts_times(folder, target, access, inventory, bin_dir)


def _plot(bin_dir: Path, results_json: Path, png: Path) -> None:
    python = plotting_python(bin_dir)
    if python is None:
        return
    done = subprocess.run([str(python), str(BENCH / "plot.py"), str(results_json), str(png)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        print(f"plot skipped: {done.stderr.strip()[-300:]}", file=sys.stderr)


def _load() -> str:
    return Path("/proc/loadavg").read_text().strip()


def _machine() -> str:
    cpus = os.cpu_count()
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{platform.system()} {platform.release()}, {cpus} CPUs, {memory:.0f} GiB"


if __name__ == "__main__":
    sys.exit(main())
