"""Time-to-ready with the module cache (issue 30): N fresh lab hosts of one kernel group, from "dkms and headers
installed, module source in /usr/src" to "module installed for the kernel", cache cold and then warm.

    python -m bench.ready [--hosts 1,8] [--module hello|nvidia] [--output bench/results]

`hello` is the small real DKMS module of the tests (tests/data/dkms-hello; seconds per build); `nvidia` runs the
`gpu-node` playbook's kernel and driver steps with `module_cache` on (`kernel_policy=upgrade`, `reboot=defer`;
about 5 minutes per build on 2 cores: the cold case at N hosts costs one build, the warm one none). Each case gets
fresh hosts; builds are counted on the hosts (hello: its PRE_BUILD counter; nvidia: make.log files under
/var/lib/dkms that no package installed), and the hosts where `dkms status` says installed for the target kernel and
the module's vermagic is that kernel's; wall time and controller CPU come from bench/measure.py. Results: ready.json
and ready.md."""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.hosts import fresh_hosts
from bench.measure import run_measured
from gpunode.lab.apt_sources import RETRIED_UPDATE
from gpunode.lab.lab import Lab

REPO = Path(__file__).resolve().parent.parent
HELLO = REPO / "tests" / "data" / "dkms-hello"
HELLO_PLAYBOOK = """steps:
  - name: hello module
    dkms_module: {name: gpunode-hello, version: "1.0", kernel: "{{ hello_kernel }}", cache: "{{ module_cache }}"}
"""
SETUP = (f"{RETRIED_UPDATE} && DEBIAN_FRONTEND=noninteractive apt-get "
         "-o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends dkms {headers} "
         ">/tmp/setup.log 2>&1 || {{ tail -20 /tmp/setup.log; exit 1; }}; "
         "ls -d /usr/src/linux-headers-*-cloud-amd64 | sed 's,.*/linux-headers-,,' | sort -V | tail -1")
COUNT = {"hello": "cat /var/log/gpunode-hello-builds 2>/dev/null | wc -l",
         "nvidia": "n=0; for f in /var/lib/dkms/nvidia-current/*/*/*/log/make.log; do [ -e \"$f\" ] && "
                   "! dpkg -S \"$f\" >/dev/null 2>&1 && n=$((n+1)); done; echo $n"}
# nvidia: the lab host made like a Debian cloud image before the timed run (not timed): initramfs-tools installed,
# as on any image with a kernel (linux-image-6.1.0-*-cloud-amd64 Depends: initramfs-tools (>= 0.120+deb8u2) |
# linux-initramfs-tool, `apt-cache show` on a lab host, Debian 12), and no package lists or archives, as the image
# build leaves it (debian-cloud-images config_space/bookworm/scripts/LAST/10-cleanup, cleanup_dirs var/cache/apt and
# var/lib/apt/lists; salsa cloud-team/debian-cloud-images, its GitHub mirror GoCarrot/debian-cloud-images at
# 1bf428c7a8acc0fcf6e02acea1802154208f6875). Without recommends: whether the images add zstd (initramfs-tools-core
# Recommends it) was not established, so the image is compressed with gzip, the slower.
IMAGE_STATE = (f"{RETRIED_UPDATE} && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y "
               "-qq --no-install-recommends initramfs-tools >/tmp/setup.log 2>&1 || { tail -20 /tmp/setup.log; "
               "exit 1; }; find /var/lib/apt/lists /var/cache/apt -mindepth 1 -depth -delete")
# nvidia: dkms 3 removes build/ after a good build and keeps the log as <version>/<kernel>/<arch>/log/make.log; a
# module cache install unpacks that log too, from its package (dpkg -S owns it): a build is a make.log no package owns.
MODULE = {"hello": "gpunode-hello", "nvidia": "nvidia-current"}  # the DKMS module and its main .ko's name
# Is the module ready on the host: the target kernel (newest cloud headers, as SETUP and kernel_policy=upgrade
# give), its `dkms status` lines saying installed, and the vermagic of the module depmod finds for that kernel.
READY = """k=$(ls -d /usr/src/linux-headers-*-cloud-amd64 2>/dev/null | sed 's,.*/linux-headers-,,' | sort -V | tail -1)
echo "KERNEL=$k"
echo "DKMS=$(dkms status -m {m} -k "$k" 2>/dev/null | grep -c ': installed')"
echo "VERMAGIC=$(modinfo -k "$k" -F vermagic {m} 2>/dev/null | head -1)"
echo "INITRD=$(lsinitramfs "/boot/initrd.img-$k" 2>/dev/null | grep -E 'modprobe.d/|nvidia' | sort | tr '\\n' ' ')"
"""


def readiness(stdout: str) -> dict:
    """What READY printed: kernel, installed (dkms status says so for that kernel), vermagic_ok (the module's
    vermagic starts with the kernel release), initramfs_files (lsinitramfs of the kernel's image: its modprobe.d
    and nvidia files, e.g. the nouveau blacklist)."""
    fields = dict(line.split("=", 1) for line in stdout.splitlines() if "=" in line)
    kernel, vermagic = fields.get("KERNEL", ""), fields.get("VERMAGIC", "")
    return {"kernel": kernel, "installed": bool(kernel) and fields.get("DKMS", "0").strip() not in ("", "0"),
            "vermagic_ok": bool(kernel) and vermagic.split(" ", 1)[0] == kernel,
            "initramfs_files": fields.get("INITRD", "").split()}


def prepare_hello(host, headers: str = "linux-headers-cloud-amd64") -> str:  # noqa: ANN001
    """dkms and a cloud kernel's headers from Debian's mirror, the hello module's source in /usr/src; the newest
    headers' kernel (the bench and tests/test_lab_module_cache.py share it)."""
    shutil.copytree(HELLO, host.root / "usr/src/gpunode-hello-1.0", dirs_exist_ok=True)
    result = host.run_inside(SETUP.format(headers=headers), timeout=1200)
    if result.returncode != 0:
        raise RuntimeError(f"{host.name}: setup failed: {result.stdout}{result.stderr}")
    return result.stdout.strip()


def _inventory(lab: Lab, hosts: list, path: Path) -> Path:
    import yaml

    data = {"all": {"hosts": {h.name: {"ansible_host": h.address} for h in hosts}, "vars": {
        "ansible_user": "gpunode", "ansible_become": True, "ansible_ssh_private_key_file": str(lab.key_path),
        "known_hosts": str(lab.known_hosts_path)}}}
    path.write_text(yaml.safe_dump(data))
    return path


SHARE_NOTE = re.compile(r"package share: (\d+) of (\d+) files .*?, (\d+) downloaded here and shared, (\d+) left to apt")


def package_files(report: Path) -> dict[str, int | None]:
    """From the run's JSON report: package files the hosts got from the controller's folder, and those fetched from
    the mirror (by the host that shared them, or by apt); None without the package share."""
    try:
        hosts = json.loads(report.read_text())["hosts"]
    except (OSError, ValueError, KeyError):
        return {"package_files_shared": None, "package_files_from_mirror": None}
    counts = [tuple(map(int, m.groups())) for h in hosts for note in h.get("notes") or []
              if (m := SHARE_NOTE.search(note))]
    if not counts:
        return {"package_files_shared": None, "package_files_from_mirror": None}
    return {"package_files_shared": sum(c[0] for c in counts),
            "package_files_from_mirror": sum(c[2] + c[3] for c in counts)}


def one_case(lab: Lab, module: str, count: int, cache: Path, index: int, work: Path, packages: Path | None) -> dict:
    """Fresh hosts, set up (not timed), then one timed provision; builds counted on the hosts. `packages`: the
    package share's folder (None: off)."""
    with fresh_hosts(lab, index, count) as hosts:
        args = ["--var", "install_docker=false", "--var", "install_container_toolkit=false",
                "--var", "kernel_policy=upgrade", "--var", "reboot=defer", "--tags", "kernel,driver"]
        playbook = "gpu-node"
        if module == "hello":
            with ThreadPoolExecutor(min(count, 8)) as pool:
                kernel = next(iter(set(pool.map(prepare_hello, hosts))))
            (work / "hello.yml").write_text(HELLO_PLAYBOOK)
            playbook, args = str(work / "hello.yml"), ["--var", f"hello_kernel={kernel}"]
        else:
            for host in hosts:
                made = host.run_inside(IMAGE_STATE, timeout=1200)
                if made.returncode != 0:
                    raise RuntimeError(f"{host.name}: setup failed: {made.stdout}{made.stderr}")
        inventory = _inventory(lab, hosts, work / f"inv-{index}.yml")
        report = work / f"report-{index}.json"
        share = ["--var", f"package_cache={packages or 'off'}", "--json-report", str(report)]
        before = [h.cpu_seconds() for h in hosts]
        measured = run_measured([sys.executable, "-m", "gpunode", "provision", "-i", str(inventory), "--playbook",
                                 playbook, "--var", f"module_cache={cache}", "-f", str(count), *share, *args],
                                cwd=REPO, timeout=3600, log=work / f"run-{index}.log")
        host_cpu = [None if a is None or b is None else round(b - a, 2)
                    for a, b in zip(before, [h.cpu_seconds() for h in hosts], strict=True)]
        builds = sum(int(h.run_inside(COUNT[module]).stdout.strip() or 0) for h in hosts)
        ready = [readiness(h.run_inside(READY.format(m=MODULE[module])).stdout) for h in hosts]
    return {"hosts": count, "exit_code": measured.exit_code, "seconds": round(measured.seconds, 2),
            "cpu_seconds": round(measured.cpu_seconds, 2),
            "cpu_seconds_per_host": round(measured.cpu_seconds / count, 2),
            "builds": builds, "dkms_installed": sum(r["installed"] for r in ready),
            "vermagic_ok": sum(r["vermagic_ok"] for r in ready), "kernels": sorted({r["kernel"] for r in ready}),
            "initramfs_files": sorted({f for r in ready for f in r["initramfs_files"]}),
            **package_files(report), **host_phases(report, hosts, host_cpu)}


def host_phases(report: Path, hosts: list, host_cpu: list[float | None]) -> dict:
    """Per host, from the run's JSON report: its time (wall), its phase times and initramfs generations, and its
    own CPU seconds during the run (its cgroup's usage_usec after less before, gpunode/lab/cgroup.py; None where
    the lab could not give it a cgroup)."""
    try:
        reported = {h["host"]: h for h in json.loads(report.read_text())["hosts"]}
    except (OSError, ValueError, KeyError):
        reported = {}
    rows = []
    for host, cpu in zip(hosts, host_cpu, strict=True):
        mine = reported.get(host.name, {})
        rows.append({"host": host.name, "seconds": round(mine.get("seconds", 0.0), 2), "host_cpu_seconds": cpu,
                     "phases": mine.get("phase_times", {}),
                     "initramfs_generations": sum(1 for t in mine.get("timed", []) if t["kind"] == "initramfs")})
    cpus = [r["host_cpu_seconds"] for r in rows if r["host_cpu_seconds"] is not None]
    return {"per_host": rows, "host_cpu_seconds_max": max(cpus) if cpus else None,
            "host_seconds_max": max((r["seconds"] for r in rows), default=None)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ready", description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", default="1,8")
    parser.add_argument("--module", choices=("hello", "nvidia"), default="hello")
    parser.add_argument("--cases", default="off,cold,warm", help="off (no cache), cold, warm (after cold)")
    parser.add_argument("--no-package-share", action="store_true",
                        help="cold and warm without package_cache (the module cache only)")
    parser.add_argument("--warm-from", default="",
                        help="a work dir of an earlier run (its cache-1 and packages-1): warm without a cold case")
    parser.add_argument("--tag", default="ready")
    parser.add_argument("--subnet", default="10.231.30.0/24")
    parser.add_argument("--output", default=str(REPO / "bench" / "results"))
    args = parser.parse_args(argv)
    lab = Lab(args.tag, args.subnet)
    lab.down()  # leftovers of an interrupted run
    rows, index = [], 40
    work = Path(tempfile.mkdtemp(prefix="gpunode-ready-"))
    print(f"work dir (run-<index>.log per case): {work}", flush=True)
    try:
        for count in (int(n) for n in args.hosts.split(",")):
            cache = Path(args.warm_from) / "cache-1" if args.warm_from else work / f"cache-{count}"
            for case in args.cases.split(","):  # off: every host builds (as before the cache)
                where = Path("off") if case == "off" else cache
                packages = None if case == "off" or args.no_package_share else \
                    (Path(args.warm_from) / "packages-1" if args.warm_from else work / f"packages-{count}")
                row = {"case": case, "module": args.module, "package_share": packages is not None,
                       **one_case(lab, args.module, count, where, index, work, packages)}
                index += count
                rows.append(row)
                print(json.dumps(row), flush=True)
    finally:
        lab.down()
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    (out / "ready.json").write_text(json.dumps({"measured": stamp, "rows": rows}, indent=2) + "\n")
    lines = [f"# time to ready with the module cache ({args.module}, {stamp})", "",
             "| hosts | cache | package share | wall s | slowest host s | host CPU s (max) | controller CPU s "
             "| controller CPU s per host | DKMS builds "
             "| dkms installed | vermagic = kernel | package files shared / from the mirror | exit |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['hosts']} | {r['case']} | {'on' if r['package_share'] else 'off'} | {r['seconds']} | "
              f"{r.get('host_seconds_max')} | {r.get('host_cpu_seconds_max')} | "
              f"{r['cpu_seconds']} | {r['cpu_seconds_per_host']} | {r['builds']} | "
              f"{r['dkms_installed']}/{r['hosts']} | {r['vermagic_ok']}/{r['hosts']} | "
              f"{r['package_files_shared']} / {r['package_files_from_mirror']} | {r['exit_code']} |" for r in rows]
    lines += ["", "Per host: wall seconds of its run, its own CPU seconds (its cgroup), initramfs generations, phases",
              ""]
    lines += [f"- {r['hosts']} {r['case']} {h['host']}: {h['seconds']} s, CPU {h['host_cpu_seconds']} s, "
              f"{h['initramfs_generations']} initramfs: " + ", ".join(f"{k} {v}" for k, v in h["phases"].items())
              for r in rows for h in r.get("per_host", [])]
    (out / "ready.md").write_text("\n".join(lines) + "\n")
    return 0 if all(r["exit_code"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
