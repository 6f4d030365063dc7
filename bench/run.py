"""gpunode vs ansible-playbook vs pyinfra on the same lab hosts doing the same work.

Usage: python -m bench.run [--hosts 1,8,32] [--repeat 3] [--rtt-ms 50] [--tools floor,gpunode,ansible,pyinfra]
                          [--tools-at 32=floor,gpunode,pyinfra]
For each host count and tool: fresh hosts, a first apply, then `repeat` converged re-runs (and as many through
a relay that adds --rtt-ms of round-trip time, like a controller far from its cloud region); every run is a
subprocess (wall time, CPU, memory), remote commands are counted in the hosts' sshd logs, and the end state of
every host is checked. The floor (bench/floor.py: one connection and one `true` per host) runs on gpunode's hosts,
each of its runs right after gpunode's. Then facts gathering and verify-gpu parse times. Needs root (the lab).
"""

from __future__ import annotations

import argparse
import compileall
import ipaddress
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import gpunode
from bench import hosts as bench_hosts
from bench import micro, report
from bench.latency import delayed
from bench.measure import run_measured
from bench.peers import ensure_peers, plotting_python, versions
from bench.report import far_case
from bench.tools import Ansible, Floor, Gpunode, Pyinfra, Tool
from bench.workload import Access, BenchHost, check_host_state, write_gpunode
from gpunode.lab.lab import Lab

BENCH = Path(__file__).resolve().parent
DEFAULT_TAG, DEFAULT_SUBNET = "bench7", "10.231.71.0/24"
TOOL_NAMES = ("floor", "gpunode", "ansible", "pyinfra")
DEFAULT_TOOLS = ",".join(TOOL_NAMES)
DEFAULT_TOOLS_AT = "32=floor,gpunode,pyinfra"  # ansible at 32 hosts: about 10 of the bench's 30 minutes (README)
NOTES = [
    "Every tool runs cold: a new process, new SSH connections (Ansible gets its own ControlPath folder per run "
    "and its master connections are closed after it), hosts in parallel with forks/--parallel = number of hosts.",
    "Ansible is tuned: ANSIBLE_PIPELINING=True, ansible_python_interpreter pinned (no discovery), "
    "gather_facts: false (no task needs facts). `ansible-facts` is the same play with Ansible's default fact "
    "gathering, run on the hosts Ansible converged (so it has no `first` row).",
    "JSON merge: gpunode's `json` step (the file's stat + base64 in the batched probe; parsed, merged and "
    "compared on the controller, written atomically with a backup only when a key differs; no python on the "
    "host); Ansible: `slurp` + `copy` with content `from_json | combine | to_nice_json`; pyinfra: the "
    "`FileContents` fact, merged in the deploy, `files.put`.",
    "gpunode gathers the facts sections its steps read (here core + package-manager state: distro, kernel, "
    "locks and their holders) on every run, in the exec that holds the run lock; Ansible here gathers none; "
    "pyinfra gathers the facts its operations need, one command each.",
    "The hosts run on the same 2 cores as the controller: host-side work (apt, python modules) competes with "
    "the controller, which makes the first apply mostly a measure of apt.",
    "floor: bench/floor.py, a new process with gpunode's python and paramiko, the same key and the same "
    "known_hosts verification as gpunode (unknown keys refused); one connection per host, one thread per host, "
    "one `true` each, then close. It runs on gpunode's hosts, each run right after gpunode's in the same case. "
    "It does no work, so its `first` row is the same program on hosts that have not been provisioned yet (run "
    "just before gpunode's first apply).",
    "Controller CPU = user + sys seconds from wait4() of the tool's process: it includes every child the tool "
    "waited for (Ansible's forked workers and their ssh clients) but not a daemonized ssh ControlPersist master, "
    "so Ansible's figure is a lower bound.",
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", default="1,8,32", help="host counts, comma-separated (default 1,8,32)")
    parser.add_argument("--repeat", type=int, default=3, help="converged re-runs per tool (median reported)")
    parser.add_argument("--tools", default=DEFAULT_TOOLS, help=f"tools, comma-separated (default {DEFAULT_TOOLS})")
    parser.add_argument("--tools-at", default=DEFAULT_TOOLS_AT, metavar="N=TOOLS[;N=TOOLS]",
                        help=f"other tools at a host count (default {DEFAULT_TOOLS_AT}; '' for --tools everywhere)")
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
    try:
        counts, plan = plan_tools(args.hosts, args.tools, args.tools_at)
    except ValueError as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 2
    if args.repeat < 1:
        print("bench: --repeat must be at least 1", file=sys.stderr)
        return 2
    try:
        first_index = index_layout(plan, args.subnet)
    except ValueError as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 2
    for count in counts:
        print(f"N={count}: {', '.join(plan[count])}", flush=True)
    bin_dir = ensure_peers()
    # The peers' venvs hold compiled bytecode (pip compiles at install); an editable gpunode run with
    # PYTHONDONTWRITEBYTECODE would compile its sources on every start: compile them once, as an install would.
    compileall.compile_dir(str(Path(gpunode.__file__).parent), quiet=1)
    result = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S"), "machine": _machine(), "versions": versions(bin_dir),
        "hosts": counts, "repeat": args.repeat, "rtt_ms": args.rtt_ms, "tools": _tool_list(args.tools),
        "tools_at": {str(n): names for n, names in plan.items()}, "notes": NOTES, "load_before": _load(),
        "runs": [], "durations_s": {},
    }
    work = Path(f"/tmp/gpunode-bench-{os.getpid()}")
    lab = Lab(args.tag, args.subnet)
    lab.down()  # leftovers of an interrupted run
    try:
        for count in counts:
            for host_tool, riders in host_sets(plan[count]):
                started = time.monotonic()
                tool, with_tools = _make(host_tool, bin_dir), [_make(name, bin_dir) for name in riders]
                result["runs"] += _bench_tool(lab, tool, with_tools, count, first_index[host_tool], args, bin_dir,
                                              work)
                label = f"N={count} {'+'.join([host_tool, *riders])}"
                result["durations_s"][label] = round(time.monotonic() - started, 1)
                print(f"  ({label}: {result['durations_s'][label]:.0f} s)", flush=True)
            result["summary"] = report.summarize(result["runs"])
            report.write(result, args.output)  # partial results survive an interrupted long run
        if not args.no_micro:
            started = time.monotonic()
            result["parse"] = micro.parse_times()
            result["facts"] = _facts(lab, first_index["facts"], bin_dir, work)
            result["durations_s"]["micro"] = round(time.monotonic() - started, 1)
    finally:
        lab.down()
    result["load_after"] = _load()
    result["summary"] = report.summarize(result["runs"])
    paths = report.write(result, args.output)
    _plot(bin_dir, paths[0], args.output / "results.png")
    print("\n".join(report.ratio_lines(result["summary"])))
    print("\n".join(f"{c['status']}: {c['item']}: {c['detail']}" for c in result["must_show"]))
    print(f"results: {', '.join(str(p) for p in paths)}")
    return 0 if all(r["ok"] for r in result["runs"]) else 1


def _tool_list(text: str) -> list[str]:
    names = list(dict.fromkeys(name.strip() for name in text.split(",") if name.strip()))
    unknown = [name for name in names if name not in TOOL_NAMES]
    if unknown or not names:
        raise ValueError(f"unknown tool {', '.join(unknown) or '(none given)'}: choose from {', '.join(TOOL_NAMES)}")
    return names


def plan_tools(hosts: str, tools: str, tools_at: str) -> tuple[list[int], dict[int, list[str]]]:
    """Host counts and the tools run at each (--tools, or --tools-at's list for that count; an entry for a count
    not in --hosts has nothing to change); ValueError names the fix."""
    try:
        counts = [int(n) for n in hosts.split(",") if n.strip()]
    except ValueError:
        raise ValueError(f"--hosts {hosts!r}: give host counts like 1,8,32") from None
    if not counts or min(counts) < 1:
        raise ValueError(f"--hosts {hosts!r}: host counts of 1 or more")
    default = _tool_list(tools)
    plan = {count: default for count in counts}
    for part in (p.strip() for p in tools_at.split(";") if p.strip()):
        count_text, sep, names = part.partition("=")
        if not sep or not count_text.strip().isdigit():
            raise ValueError(f"--tools-at {part!r}: write N=TOOLS, e.g. 32=floor,gpunode,pyinfra")
        at = _tool_list(names)
        if int(count_text) in plan:
            plan[int(count_text)] = at
    return counts, plan


def host_sets(names: list[str]) -> list[tuple[str, list[str]]]:
    """Which tools get fresh hosts, in order, and which run on another tool's hosts: the floor rides on gpunode's."""
    rides = "floor" in names and "gpunode" in names
    return [(name, ["floor"] if rides and name == "gpunode" else []) for name in names
            if not (rides and name == "floor")]


def index_layout(plan: dict[int, list[str]], subnet: str) -> dict[str, int]:
    """The first host index of each host set. Every tool that gets hosts of its own at some N (the floor only when
    it runs without gpunode) has a block as large as the largest N, in TOOL_NAMES order, then the facts host; host
    sets never share an index (names and addresses stay one host's). Addresses are subnet + 10 + index, below the
    broadcast address: a layout that does not fit raises ValueError naming the fix."""
    size = max(plan) + 1
    owners = [name for name in TOOL_NAMES if any(name == own for tools in plan.values() for own, _ in host_sets(tools))]
    first = {name: block * size + 1 for block, name in enumerate([*owners, "facts"])}
    network = ipaddress.ip_network(subnet, strict=False)
    room = network.num_addresses - 12  # .0, the gateway and .2 to .9 are not hosts' (LabNetwork.address), nor the top
    if first["facts"] > room:
        last = network.network_address + 10 + first["facts"]
        raise ValueError(f"{len(owners)} host sets of up to {max(plan)} hosts ({', '.join(owners)}) and the facts "
                         f"host reach {last}, past {network}: give a larger --subnet (e.g. a /23) or fewer tools "
                         "at the largest N (--tools-at)")
    return first


def _make(name: str, bin_dir: Path) -> Tool:
    makers = {"floor": Floor, "gpunode": Gpunode, "ansible": lambda: Ansible(bin_dir),
              "pyinfra": lambda: Pyinfra(bin_dir)}
    return makers[name]()


def _bench_tool(lab: Lab, tool: Tool, riders: list[Tool], count: int, first_index: int, args: argparse.Namespace,
                bin_dir: Path, work: Path) -> list[dict]:
    """One host set: `tool`'s first apply, converged and far runs; each rider (the floor) runs on the same hosts,
    its first run before the tool's first apply, its other runs right after each of the tool's."""
    runs = []
    with bench_hosts.fresh_hosts(lab, first_index, count) as hosts:
        folder = work / f"{tool.name}-{count}"
        folder.mkdir(parents=True, exist_ok=True)
        targets = bench_hosts.bench_hosts(hosts)
        for each in [*riders, tool]:
            each.prepare(folder, targets, bench_hosts.access(lab))
        runs += [_measure(rider, folder, hosts, count, "first", "first") for rider in riders]
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
                for each in [variant, *(riders if variant is tool else [])]:
                    runs.append(_measure(each, folder, hosts, count, "converged", f"converged{i}"))
        if args.rtt_ms:
            runs += _far_runs(lab, [tool, *riders], hosts, count, args, folder)
    return runs


def _far_runs(lab: Lab, tools: list[Tool], hosts: list, count: int, args: argparse.Namespace,
              folder: Path) -> list[dict]:
    """Converged re-runs through a relay that adds args.rtt_ms of round-trip time to every SSH connection."""
    gateway = lab.network.gateway
    with delayed(gateway, {h.index: h.address for h in hosts}, args.rtt_ms) as relay:
        far_folder = folder / "far"
        far_folder.mkdir(exist_ok=True)
        known = far_folder / "known_hosts"
        known.write_text("".join(f"[{gateway}]:{relay.port(h.index)} {lab.host_public_key(h)}\n" for h in hosts))
        near = bench_hosts.access(lab)
        for tool in tools:
            tool.prepare(far_folder, [BenchHost(h.name, gateway, relay.port(h.index)) for h in hosts],
                         Access(near.user, near.key, str(known)))
        return [_measure(tool, far_folder, hosts, count, far_case(args.rtt_ms), f"far{i}")
                for i in range(args.repeat) for tool in tools]


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
           "tree_rss_kib": measured.tree_rss_kib, "cpu_s": round(measured.cpu_seconds, 3),
           "cpu_s_per_host": round(measured.cpu_seconds / count, 4)}
    if not ok:
        row["output_tail"] = measured.output[-3000:]
    print(f"  {tool.name:<14} N={count:<3} {run_id:<11} {measured.seconds:7.2f}s  exit {measured.exit_code}  "
          f"changed {outcome.changed}  cmds {sshd.sessions:<4} logins {sshd.logins:<3} "
          f"cpu {measured.cpu_seconds:5.2f}s  rss {measured.maxrss_kib // 1024}/{measured.tree_rss_kib // 1024} MiB"
          f"{'' if ok else '  NOT OK'}",
          flush=True)
    return row


def _facts(lab: Lab, first_index: int, bin_dir: Path, work: Path) -> dict:
    with bench_hosts.fresh_hosts(lab, first_index, 1) as hosts:
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
