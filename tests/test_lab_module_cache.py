"""The module cache on real lab hosts: a real DKMS module (tests/data/dkms-hello) built by real dkms against the lab's
Debian 12 cloud kernel headers once for three hosts of one group; the others install the cached package without a
compiler run; a tampered entry is refused and rebuilt. Builds are counted on the hosts by the module's own PRE_BUILD
script (it runs before every real DKMS build)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from bench.ready import HELLO_PLAYBOOK, prepare_hello  # one setup for the bench and this test
from gpunode.lab.apt_sources import RETRIED_UPDATE
from gpunode.modcache.key import CacheKey
from gpunode.modcache.remote import build_command, finish_command, install_command, pack_command, parse_pack
from gpunode.modcache.store import Store
from tests.conftest import host_inventory, run_cli
from tests.https_folder import https_folder

pytestmark = pytest.mark.lab
MODULE, VERSION = "gpunode-hello", "1.0"


def _builds(host) -> int:
    log = host.root / "var/log/gpunode-hello-builds"
    return len(log.read_text().split()) if log.exists() else 0


def _provision(inventory, playbook, kernel, cache, *args, report=None, env=None):
    extra = ("--json-report", str(report)) if report else ()
    return run_cli("provision", "-i", str(inventory), "--playbook", str(playbook), "--var", f"hello_kernel={kernel}",
                   "--var", f"module_cache={cache}", *args, *extra, timeout=900, env=env)


def _installed(host, kernel: str) -> None:
    """What dkms, modinfo and dpkg say on the host: installed for the kernel, vermagic of the kernel."""
    status = host.run_inside(f"dkms status -m {MODULE} -v {VERSION} -k {kernel}")
    assert f"{MODULE}/{VERSION}, {kernel}, x86_64: installed" in status.stdout, status.stdout + status.stderr
    vermagic = host.run_inside(f"modinfo -F vermagic /lib/modules/{kernel}/updates/dkms/gpunode_hello.ko")
    assert vermagic.stdout.startswith(f"{kernel} "), vermagic.stdout + vermagic.stderr


@pytest.mark.slow  # 75 s on a quiet machine, 115-140 s with another session's suite on the 2 cores (mostly apt)
def test_one_build_for_three_hosts_then_installs_from_the_cache(lab, fresh_trio, tmp_path):
    with ThreadPoolExecutor(3) as pool:
        kernels = set(pool.map(prepare_hello, fresh_trio))
    assert len(kernels) == 1, kernels
    kernel = kernels.pop()
    playbook = tmp_path / "hello.yml"
    playbook.write_text(HELLO_PLAYBOOK)
    cache = tmp_path / "cache"
    inventory = host_inventory(lab, fresh_trio, tmp_path / "inv.yml")

    check = _provision(inventory, playbook, kernel, cache, "--check")
    assert check.code == 0, check.output
    would = [line.strip() for line in check.stdout.splitlines() if line.startswith("    - ")]  # the summary's lines
    assert sum(w.startswith("- build gpunode-hello/1.0") and "add it to the module cache" in w for w in would) == 1
    assert sum(w.startswith("- wait for ") and "then install it from the module cache" in w for w in would) == 2
    assert not cache.exists() or not list(cache.glob("*/*/*/manifest.json"))

    first = _provision(inventory, playbook, kernel, cache, report=tmp_path / "r1.json")
    assert first.code == 0, first.output
    assert sum(_builds(h) for h in fresh_trio) == 1, [_builds(h) for h in fresh_trio]
    notes = {h["host"]: " ".join(h.get("notes") or []) for h in json.loads((tmp_path / "r1.json").read_text())["hosts"]}
    assert sum("installed from the cache" in n for n in notes.values()) == 2, notes
    for host in fresh_trio:
        _installed(host, kernel)
        if not _builds(host):
            pkg = host.run_inside(f"dpkg -s gpunode-dkms-{MODULE}-{kernel}")
            assert "Status: install ok installed" in pkg.stdout, pkg.stdout + pkg.stderr
            assert not (host.root / f"var/lib/dkms/{MODULE}/{VERSION}/build/make.log").exists()  # no make ran

    listed = json.loads(run_cli("cache", "list", "--dir", str(cache), "--json").stdout)
    (entry,) = listed["entries"]
    assert entry["kernel"] == kernel and entry["problem"] == "" and entry["vermagic"].startswith(f"{kernel} ")

    again = _provision(inventory, playbook, kernel, cache, report=tmp_path / "r2.json")
    assert again.code == 0, again.output
    assert all(s["status"] == "ok" for h in json.loads((tmp_path / "r2.json").read_text())["hosts"]
               for s in h["steps"]), again.output

    # A tampered entry: its package changed after the manifest was written. Refused, rebuilt, replaced.
    builder = next(h for h in fresh_trio if _builds(h))
    other = next(h for h in fresh_trio if not _builds(h))
    other.run_inside(f"dkms remove {MODULE}/{VERSION} -k {kernel}; dpkg -r gpunode-dkms-{MODULE}-{kernel}")
    package = Path(entry["folder"]) / entry["file"]
    package.write_bytes(package.read_bytes() + b"tampered")
    only = host_inventory(lab, [other], tmp_path / "inv-one.yml")
    third = _provision(only, playbook, kernel, cache, report=tmp_path / "r3.json")
    assert third.code == 0, third.output
    (host_report,) = json.loads((tmp_path / "r3.json").read_text())["hosts"]
    assert "refused the cached" in " ".join(host_report["notes"]) and "sha256" in " ".join(host_report["notes"])
    assert _builds(other) == 1 and _builds(builder) == 1
    _installed(other, kernel)
    (fresh,) = json.loads(run_cli("cache", "list", "--dir", str(cache), "--json").stdout)["entries"]
    assert fresh["problem"] == "" and fresh["built_on"] == other.name

    # A consistent manifest around a module of another kernel (its vermagic rewritten, the package rebuilt and its
    # sha256 and the manifest's vermagic made to match): the controller's checks pass, the host refuses it.
    other.run_inside(f"dkms remove {MODULE}/{VERSION} -k {kernel}; dpkg -r gpunode-dkms-{MODULE}-{kernel}")
    _wrong_kernel_entry(Path(fresh["folder"]), kernel)
    fourth = _provision(only, playbook, kernel, cache, report=tmp_path / "r4.json")
    assert fourth.code == 0, fourth.output
    (host_report,) = json.loads((tmp_path / "r4.json").read_text())["hosts"]
    assert "not for this kernel (vermagic)" in " ".join(host_report["notes"]), host_report["notes"]
    assert _builds(other) == 2
    _installed(other, kernel)

    # The same folder served over https as a bucket serves it: the host installs the entry read from the URL (no
    # build); with the URL's entry gone it builds, keeps the build in the controller's mirror and says where to copy it.
    other.run_inside(f"dkms remove {MODULE}/{VERSION} -k {kernel}; dpkg -r gpunode-dkms-{MODULE}-{kernel}")
    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "modules").symlink_to(cache)
    (tmp_path / "certs").mkdir()
    with https_folder(tmp_path / "www", tmp_path / "certs") as served:
        env = {"XDG_CACHE_HOME": str(tmp_path / "home"), "SSL_CERT_FILE": str(served.ca_file)}
        fifth = _provision(only, playbook, kernel, served.url, report=tmp_path / "r5.json", env=env)
        assert fifth.code == 0, fifth.output
        (host_report,) = json.loads((tmp_path / "r5.json").read_text())["hosts"]
        assert "installed from the cache" in " ".join(host_report["notes"]), host_report["notes"]
        assert _builds(other) == 2 and any(p.endswith(".deb") for p in served.requests), served.requests
        _installed(other, kernel)

        other.run_inside(f"dkms remove {MODULE}/{VERSION} -k {kernel}; dpkg -r gpunode-dkms-{MODULE}-{kernel}")
        shutil.rmtree(cache / CacheKey(MODULE, VERSION, kernel, "x86_64").path)
        shutil.rmtree(tmp_path / "home")
        sixth = _provision(only, playbook, kernel, served.url, report=tmp_path / "r6.json", env=env)
        assert sixth.code == 0, sixth.output
    (host_report,) = json.loads((tmp_path / "r6.json").read_text())["hosts"]
    assert "is read-only to gpunode" in " ".join(host_report["notes"]), host_report["notes"]
    assert _builds(other) == 3
    _installed(other, kernel)
    (mirrored,) = (tmp_path / "home" / "gpunode" / "modules-from").glob(f"*/{kernel}/x86_64/*/manifest.json")
    assert json.loads(mirrored.read_text())["built_on"] == other.name


def _wrong_kernel_entry(folder: Path, kernel: str) -> None:
    """Rewrite the entry's module as one for another kernel release of the same length, consistently."""
    import hashlib
    import subprocess

    manifest = json.loads((folder / "manifest.json").read_text())
    package, tree = folder / manifest["file"], folder / "tree"
    subprocess.run(["dpkg-deb", "-R", str(package), str(tree)], check=True)
    parts = kernel.split("-")  # 6.1.0-56-cloud-amd64 -> 6.1.0-99-cloud-amd64
    parts[1] = "99" if parts[1] != "99" else "98"
    wrong = "-".join(parts)
    assert len(wrong) == len(kernel) and wrong != kernel
    for ko in tree.rglob("*.ko"):
        ko.write_bytes(ko.read_bytes().replace(f"vermagic={kernel} ".encode(), f"vermagic={wrong} ".encode()))
    subprocess.run(["dpkg-deb", "--root-owner-group", "-b", str(tree), str(package)], check=True,
                   capture_output=True)
    shutil.rmtree(tree)
    manifest["sha256"] = hashlib.sha256(package.read_bytes()).hexdigest()
    (folder / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.extended  # 2.5-4 minutes on the shared 2 cores (three hosts' apt installs of dkms and headers)
def test_a_host_with_another_kernel_builds_its_own_in_the_same_run(lab, new_host, tmp_path):
    """Two hosts on the newest cloud kernel's headers and one on an older one (6.1.0-55): two groups, two builds,
    two entries; the second host of the first group installs from the cache."""
    import yaml

    hosts = [new_host(), new_host(), new_host()]
    older = "linux-headers-6.1.0-55-cloud-amd64"
    with ThreadPoolExecutor(3) as pool:
        kernels = list(pool.map(prepare_hello, hosts, ["linux-headers-cloud-amd64"] * 2 + [older]))
    assert kernels[0] == kernels[1] != kernels[2] == "6.1.0-55-cloud-amd64", kernels
    inventory = host_inventory(lab, hosts, tmp_path / "inv.yml")
    data = yaml.safe_load(inventory.read_text())
    for host, kernel in zip(hosts, kernels, strict=True):
        data["all"]["children"]["lab"]["hosts"][host.name]["hello_kernel"] = kernel
    inventory.write_text(yaml.safe_dump(data))
    playbook = tmp_path / "hello.yml"
    playbook.write_text(HELLO_PLAYBOOK)
    cache = tmp_path / "cache"
    result = run_cli("provision", "-i", str(inventory), "--playbook", str(playbook), "--var",
                     f"module_cache={cache}", timeout=900)
    assert result.code == 0, result.output
    assert _builds(hosts[0]) + _builds(hosts[1]) == 1 and _builds(hosts[2]) == 1
    for host, kernel in zip(hosts, kernels, strict=True):
        _installed(host, kernel)
    listed = json.loads(run_cli("cache", "list", "--dir", str(cache), "--json").stdout)["entries"]
    assert sorted(e["kernel"] for e in listed) == sorted({kernels[0], kernels[2]})


def _driver_line(output: str, host: str) -> str:
    """The host's live line of the driver step in a check run's output."""
    lines = [line for line in output.splitlines() if f"[{host}] NVIDIA driver: would-change" in line]
    assert len(lines) == 1, output
    return lines[0]


def test_check_mode_names_the_host_that_builds_the_nvidia_module(lab, new_host, tmp_path):
    """Issue 30: `--check` on two fresh hosts whose package lists offer Debian's nvidia-kernel-dkms: one builds the
    group's module, the other waits for it; with the group's entry in the cache both install from it. The group's
    version is the one the host's own apt offers. Nothing is installed."""
    import re

    hosts = [new_host(), new_host()]
    for host in hosts:
        refreshed = host.run_inside(RETRIED_UPDATE, timeout=600)
        assert refreshed.returncode == 0, refreshed.stderr
    version = hosts[0].run_inside("apt-cache show --no-all-versions nvidia-kernel-dkms | sed -n 's/^Version: //p'")
    upstream = version.stdout.strip().split("-")[0]
    assert re.fullmatch(r"\d+\.\d+\.\d+", upstream), version.stdout
    inventory = host_inventory(lab, hosts, tmp_path / "inv.yml")
    cache = tmp_path / "cache"
    args = ("provision", "-i", str(inventory), "--playbook", "playbooks/gpu-node.yml", "--check", "--tags",
            "kernel,driver", "--var", "kernel_policy=upgrade", "--var", "reboot=defer", "--var",
            f"module_cache={cache}")

    cold = run_cli(*args, timeout=600)
    assert cold.code == 0, cold.output
    said = {h.name: _driver_line(cold.output, h.name) for h in hosts}
    built = {n: re.search(rf"kernel module: build nvidia-current/{upstream} for kernel (\S+) with DKMS", line)
             for n, line in said.items()}
    (builder,) = [n for n, found in built.items() if found]
    (waiter,) = [n for n in said if n != builder]
    kernel = built[builder].group(1)
    assert f"kernel module: wait for {builder}'s DKMS build of nvidia-current/{upstream} for kernel {kernel}, then " \
           "install it from the module cache" in said[waiter], said

    key = CacheKey("nvidia-current", upstream, kernel, "x86_64", "proprietary")
    Store(cache).put(key, "nvidia.deb", b"not installed: check mode", f"{kernel} SMP mod_unload modversions ", "h0")
    warm = run_cli(*args, timeout=600)
    assert warm.code == 0, warm.output
    for host in hosts:
        assert f"kernel module: install nvidia-current/{upstream} for kernel {kernel} from the module cache (built " \
               "on h0)" in _driver_line(warm.output, host.name), warm.output
    for host in hosts:
        assert host.run_inside("dpkg-query -W nvidia-kernel-dkms").returncode != 0


def _script(host, command: str, stdin: bytes = b"") -> subprocess.CompletedProcess[str]:
    """`command` run by bash inside the host, `stdin` on its standard input (as the controller sends a package)."""
    (host.root / "root/gpunode-cmd.sh").write_text(command)
    (host.root / "root/gpunode-in").write_bytes(stdin)
    return host.run_inside("bash /root/gpunode-cmd.sh < /root/gpunode-in", timeout=600)


# NVIDIA's kmod DKMS RPM's %post, line by line (NVIDIA/yum-packaging-dkms-nvidia dkms-nvidia.spec@b28ed696:62-66,
# dkms-open-nvidia.spec:77-81), with `-k` naming the kernel it builds for: the spec's lines name none, so dkms takes
# the running kernel, and a lab host runs the lab machine's kernel, for which no headers exist.
KMOD_POST = ("dkms add -m {m} -v {v} -q || :; dkms build -m {m} -v {v} -k {k} -q || :; "
             "dkms install -m {m} -v {v} -k {k} -q --force || :")


@pytest.mark.slow  # two hosts' apt installs of dkms and headers: 60-120 s on the shared 2 cores
def test_the_tar_form_placed_before_the_packages_post_makes_dkms_skip_the_compile(lab, new_host):
    """The RPM hosts' form (gpunode/modcache/remote.py, form "tar"), on real dkms: packed on the host that built the
    module; on another host, placed while the module's DKMS source is not installed yet (as before `dnf install` of
    NVIDIA's kmod DKMS package), then the source arrives and the kmod package's %post runs: dkms finds the module
    built and installs it without a compiler run; `dkms status` says installed."""
    hosts = [new_host(), new_host()]
    with ThreadPoolExecutor(2) as pool:
        kernels = set(pool.map(prepare_hello, hosts))
    (kernel,) = kernels
    key = CacheKey(MODULE, VERSION, kernel, "x86_64")
    builder, other = hosts
    assert _script(builder, build_command(key)).returncode == 0
    packed = _script(builder, pack_command(key, "tar"))
    assert packed.returncode == 0, packed.stderr
    vermagic, filename, data = parse_pack(packed.stdout)
    assert vermagic.startswith(f"{kernel} ") and filename.endswith(".tar.gz") and _builds(builder) == 1

    other.run_inside(f"mv /usr/src/{MODULE}-{VERSION} /root/src-aside")  # the driver package is not installed yet
    placed = _script(other, install_command(key, hashlib.sha256(data).hexdigest(), "tar"), data)
    assert placed.returncode == 0 and "PLACED" in placed.stdout, placed.stdout + placed.stderr
    assert not (other.root / f"var/lib/dkms/{MODULE}/{VERSION}/source").exists()
    other.run_inside(f"mv /root/src-aside /usr/src/{MODULE}-{VERSION}")  # what the package's files bring
    post = _script(other, KMOD_POST.format(m=MODULE, v=VERSION, k=kernel))
    assert post.returncode == 0, post.stdout + post.stderr  # -q: dkms prints nothing, not even "already built"
    finish = _script(other, finish_command(key))
    assert finish.returncode == 0, finish.stdout + finish.stderr
    assert _builds(other) == 0
    assert not (other.root / f"var/lib/dkms/{MODULE}/{VERSION}/build/make.log").exists()  # no make ran
    _installed(other, kernel)

    damaged = _script(other, install_command(key, "0" * 64, "tar"), data)
    assert damaged.returncode == 5, damaged.stdout + damaged.stderr
