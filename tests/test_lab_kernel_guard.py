"""The kernel guard on a real lab host: a newer Debian cloud kernel installed by hand with `apt-get install` after
gpunode's run. The "driver" is the small real DKMS module tests/data/dkms-hello (a real DKMS build of the nvidia
module takes about 5 minutes here, and the guard's hooks treat any DKMS module the same way: kernel_guard.module).
Builds are counted on the host by the module's own PRE_BUILD script, which runs before every real DKMS build.

(a) The module cache (a folder on the node, as an NFS mount of the controller's cache presents it) holds the group
    of the new kernel, built on another host: when apt returns, `dkms status` says installed for the new kernel, its
    module's vermagic is the new kernel's, and no build ran on the node (the build counter did not move; the build
    log in DKMS's tree is the builder host's, from the package).
(b) No cache entry for the next kernel and no compiler (gcc diverted away): Debian's dkms hook fails the kernel's
    postinst, and the boot default stays at the previous kernel with the module: `grub-editenv list` reads the
    saved_entry back, GRUB's own 00_header turns the guard's GRUB_DEFAULT=saved into `set default="${saved_entry}"`,
    and verify-gpu says why. Then the compiler is back, `dpkg --configure -a` builds the module, and the guard
    releases the default (no saved_entry: GRUB boots its first entry, the newest kernel).
(c) The cache read over https (served on the node with a test CA added to its trust store; the node's curl checks
    the certificate): the new kernel's module removed, its image package reinstalled, the module back from the URL.

What a container cannot show: lab hosts are systemd-nspawn containers sharing this machine's kernel, so no reboot
into the new kernel happens, and grub-mkconfig cannot probe the overlay root (grub-probe fails on `overlay`):
grub.cfg is written by Debian's own /etc/grub.d/10_linux, the script grub-mkconfig runs, with grub-probe replaced by
/bin/false (its documented fallback then uses the GRUB_DEVICE name as the device id, `gnulinux-...-/dev/vda1`).
zz-update-grub does nothing in a container (it checks `systemd-detect-virt --container`), so the guard does not run
update-grub there either."""

from __future__ import annotations

import json
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from bench.ready import HELLO, HELLO_PLAYBOOK
from gpunode.lab.apt_sources import RETRIED_UPDATE
from tests.conftest import host_inventory, run_cli
from tests.https_folder import make_certificate

pytestmark = [pytest.mark.lab, pytest.mark.slow]
MODULE, VERSION = "gpunode-hello", "1.0"
APT = "DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -q --no-install-recommends"
# cloud kernels whose image and headers both have a candidate, oldest first
KERNELS = ("for p in $(apt-cache pkgnames linux-image- | grep -E '^linux-image-[0-9][^ ]*-cloud-amd64$'); do "
           "k=${p#linux-image-}; for q in linux-image-$k linux-headers-$k; do "
           "c=$(apt-cache policy $q | sed -n 's/^ *Candidate: //p'); [ -n \"$c\" ] && [ \"$c\" != '(none)' ] || "
           "continue 2; done; echo $k; done | sort -V")
GRUB_CFG = ("mkdir -p /boot/grub && pkgdatadir=/usr/share/grub grub_probe=/bin/false GRUB_DEVICE=/dev/vda1 "
            "GRUB_DISTRIBUTOR=Debian /etc/grub.d/10_linux > /boot/grub/grub.cfg")
GUARD_PLAYBOOK = """steps:
  - name: kernel guard
    kernel_guard: {module: gpunode-hello, version: "1.0", flavour: "", cache: "{{ guard_cache }}"}
"""
# the module cache served over https on the node itself (a bucket's https endpoint stands here: the node's curl checks
# the certificate against the node's trust store, where the test's CA is added)
SERVE = """import http.server, os, ssl
os.chdir("/srv")
httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 8443), http.server.SimpleHTTPRequestHandler)
tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
tls.load_cert_chain("/var/tmp/cert.pem", "/var/tmp/key.pem")
httpd.socket = tls.wrap_socket(httpd.socket, server_side=True)
httpd.serve_forever()
"""


def _inside(host, command: str, timeout: float = 900) -> str:
    result = host.run_inside(command, timeout=timeout)
    assert result.returncode == 0, f"{host.name}: {command}\n{result.stdout}{result.stderr}"
    return result.stdout


def _builds(host) -> int:
    log = host.root / "var/log/gpunode-hello-builds"
    return len(log.read_text().split()) if log.exists() else 0


def _timed_install(host, kernel: str) -> tuple[int, float, str]:
    """`apt-get install` of a kernel image and its headers, by hand; (exit status, seconds, output)."""
    start = time.monotonic()
    result = host.run_inside(f"{APT} linux-image-{kernel} linux-headers-{kernel} 2>&1", timeout=1200)
    return result.returncode, time.monotonic() - start, result.stdout + result.stderr


def _findings(stdout: str) -> dict[str, dict]:
    """verify-gpu --json's findings by id (one host: its report object)."""
    assert stdout.strip(), "verify-gpu printed no report"
    data = json.loads(stdout)
    reports = data.get("hosts", []) if "hosts" in data else [data]
    return {f["id"]: f for report in reports for f in report["findings"]}


def _status(host, kernel: str) -> str:
    return host.run_inside(f"dkms status -m {MODULE} -v {VERSION} -k {kernel}").stdout


def _builder(host, kernel: str, cache: Path, tmp_path: Path, lab) -> None:
    """Another host of the group: its headers, the module built there by gpunode and put in the module cache."""
    shutil.copytree(HELLO, host.root / f"usr/src/{MODULE}-{VERSION}")
    _inside(host, f"{RETRIED_UPDATE} && {APT} dkms linux-headers-{kernel} >/var/tmp/setup.log 2>&1 && "
                  f"dkms add {MODULE}/{VERSION}", timeout=1500)
    playbook = tmp_path / "hello.yml"
    playbook.write_text(HELLO_PLAYBOOK)
    built = run_cli("provision", "-i", str(host_inventory(lab, [host], tmp_path / "builder.yml")), "--playbook",
                    str(playbook), "--var", f"hello_kernel={kernel}", "--var", f"module_cache={cache}")
    assert built.code == 0, built.output


def _node(host, old: str) -> None:
    """The node: dkms, GRUB's tools, and an older cloud kernel whose module DKMS builds at its install."""
    shutil.copytree(HELLO, host.root / f"usr/src/{MODULE}-{VERSION}")
    _inside(host, f"{RETRIED_UPDATE} && {APT} dkms grub2-common curl >/var/tmp/setup.log 2>&1 && "
                  f"dkms add {MODULE}/{VERSION} && {APT} linux-image-{old} linux-headers-{old} >>/var/tmp/setup.log "
                  "2>&1", timeout=1500)


def test_a_later_kernel_gets_its_module_from_the_cache_or_stays_out_of_the_boot_default(lab, new_host, tmp_path):
    node, builder = new_host(), new_host()
    _inside(node, f"{RETRIED_UPDATE} >/dev/null")
    kernels = _inside(node, KERNELS, timeout=300).split()
    assert len(kernels) >= 3, kernels
    old, new, third = kernels[-3:]
    cache = tmp_path / "cache"
    with ThreadPoolExecutor(2) as pool:
        done = [pool.submit(_builder, builder, new, cache, tmp_path, lab), pool.submit(_node, node, old)]
        for future in done:
            future.result()
    assert "installed" in _status(node, old) and _builds(node) == 1  # built at the old kernel's install
    (entry,) = cache.glob(f"{new}/*/{MODULE}-{VERSION}/manifest.json")
    shutil.copytree(entry.parent.parent.parent, node.root / "srv/modcache" / new)  # as the node's NFS mount shows it

    inventory = host_inventory(lab, [node], tmp_path / "node.yml")
    playbook = tmp_path / "guard.yml"
    playbook.write_text(GUARD_PLAYBOOK)
    folder = ("--var", "guard_cache=/srv/modcache")
    check = run_cli("provision", "-i", str(inventory), "--playbook", str(playbook), *folder, "--check")
    assert check.code == 0 and "+exec /usr/lib/gpunode/kernel-guard cache \"$@\"" in check.stdout, check.output
    started = time.monotonic()
    applied = run_cli("provision", "-i", str(inventory), "--playbook", str(playbook), *folder)
    guard_seconds = time.monotonic() - started
    assert applied.code == 0, applied.output
    again = run_cli("provision", "-i", str(inventory), "--playbook", str(playbook), *folder, "--json-report",
                    str(tmp_path / "again.json"))
    assert again.code == 0 and all(s["status"] == "ok" for h in json.loads((tmp_path / "again.json").read_text())
                                   ["hosts"] for s in h["steps"]), again.output
    order = _inside(node, "run-parts --test /etc/kernel/postinst.d; run-parts --test /etc/kernel/header_postinst.d")
    assert order.split() == ["/etc/kernel/postinst.d/50-gpunode-module-cache", "/etc/kernel/postinst.d/dkms",
                             "/etc/kernel/postinst.d/initramfs-tools", "/etc/kernel/postinst.d/zz-update-grub",
                             "/etc/kernel/postinst.d/zzz-gpunode-kernel-guard",
                             "/etc/kernel/header_postinst.d/50-gpunode-module-cache",
                             "/etc/kernel/header_postinst.d/dkms",
                             "/etc/kernel/header_postinst.d/zzz-gpunode-kernel-guard"], order

    # (a) the cache holds the new kernel's group: installed before apt returns, no build on the node
    code, seconds_a, output = _timed_install(node, new)
    assert code == 0, output
    assert f"{MODULE}/{VERSION}, {new}, x86_64: installed" in _status(node, new)
    assert _builds(node) == 1, "a DKMS build ran on the node"
    vermagic = _inside(node, f"modinfo -k {new} -F vermagic gpunode_hello")  # the module depmod indexed
    assert vermagic.startswith(f"{new} "), vermagic
    log = f"var/lib/dkms/{MODULE}/{VERSION}/{new}/x86_64/log/make.log"
    assert (node.root / log).read_bytes() == (builder.root / log).read_bytes()  # the builder's log, from the package
    assert f"installed {MODULE} {VERSION} from the module cache" in output, output
    assert not (node.root / "var/lib/gpunode/kernel-guard.state").exists()  # nothing held back

    # (b) no cache entry for the next kernel, and no compiler: the boot default stays at the new kernel
    _inside(node, GRUB_CFG)
    assert f"'gnulinux-{new}-advanced-/dev/vda1'" in (node.root / "boot/grub/grub.cfg").read_text()
    assert "saved_entry" not in _inside(node, "grub-editenv list")
    _inside(node, 'g=$(readlink -f /usr/bin/gcc) && dpkg-divert --local --rename --divert "$g.gpunode-test" '
                  '--add "$g" && ! gcc --version')
    code, seconds_b, output = _timed_install(node, third)
    assert code != 0 and "/etc/kernel/postinst.d/dkms exited with return code" in output, output  # Debian's dkms
    assert "installed" not in _status(node, third)
    entry_id = f"gnulinux-advanced-/dev/vda1>gnulinux-{new}-advanced-/dev/vda1"
    assert f"saved_entry={entry_id}" in _inside(node, "grub-editenv list").splitlines()
    header = _inside(node, "set -a; for f in /etc/default/grub /etc/default/grub.d/*.cfg; do [ ! -e \"$f\" ] || "
                           ". \"$f\"; done; pkgdatadir=/usr/share/grub grub_probe=/bin/false /etc/grub.d/00_header")
    assert 'set default="${saved_entry}"' in header, header  # GRUB's own reading of GRUB_DEFAULT=saved
    verified = run_cli("verify-gpu", "-i", str(inventory), "--target", node.name, "--json")
    assert verified.stdout.strip(), verified.output
    kept = _findings(verified.stdout)["kernel-guard-kept-default"]
    assert kept["summary"] == (f"kernel {third} installed without its NVIDIA module ({MODULE}/{VERSION}); boot "
                               f"default kept at {new}"), kept

    # the compiler is back: dpkg --configure -a builds it, and the guard gives the default back to the newest kernel
    _inside(node, 'g=$(readlink -f /usr/bin/gcc) && dpkg-divert --local --rename --remove "$g"')
    _inside(node, "dpkg --configure -a >/var/tmp/configure.log 2>&1", timeout=1200)
    assert f"{MODULE}/{VERSION}, {third}, x86_64: installed" in _status(node, third)
    assert "saved_entry" not in _inside(node, "grub-editenv list")
    assert not (node.root / "var/lib/gpunode/kernel-guard.state").exists()
    assert not (node.root / "etc/default/grub.d/gpunode-kernel-guard.cfg").exists()  # GRUB_DEFAULT is the user's again
    verified = run_cli("verify-gpu", "-i", str(inventory), "--target", node.name, "--json")
    assert not [f for f in _findings(verified.stdout) if f.startswith("kernel-guard")], verified.stdout

    # (c) the cache read over https: the new kernel's module removed, its image package reinstalled by hand (its
    # postinst runs the hooks again): the module comes from the https URL, checked against its manifest
    cert, key = make_certificate(tmp_path)
    shutil.copy(cert, node.root / "var/tmp/cert.pem")
    shutil.copy(key, node.root / "var/tmp/key.pem")
    shutil.copy(cert, node.root / "usr/local/share/ca-certificates/gpunode-test.crt")
    (node.root / "var/tmp/serve.py").write_text(SERVE)
    _inside(node, "update-ca-certificates >/dev/null && setsid nohup python3 /var/tmp/serve.py >/var/tmp/serve.log "
                  "2>&1 < /dev/null & sleep 1")
    url = ("--var", "guard_cache=https://127.0.0.1:8443/modcache")
    assert run_cli("provision", "-i", str(inventory), "--playbook", str(playbook), *url).code == 0
    _inside(node, f"dkms remove {MODULE}/{VERSION} -k {new} >/dev/null")
    assert "installed" not in _status(node, new)
    builds = _builds(node)
    started = time.monotonic()
    output = _inside(node, f"{APT} --reinstall linux-image-{new} 2>&1", timeout=1200)
    seconds_c = time.monotonic() - started
    assert f"installed {MODULE} {VERSION} from the module cache" in output, output
    assert f"{MODULE}/{VERSION}, {new}, x86_64: installed" in _status(node, new) and _builds(node) == builds
    served = (node.root / "var/tmp/serve.log").read_text()
    assert f'"GET /modcache/{new}/x86_64/{MODULE}-{VERSION}/manifest.json HTTP/1.1" 200' in served, served
    assert ".deb HTTP/1.1\" 200" in served, served
    print(f"\nkernel guard: {old} -> {new} (cache) -> {third} (no cache, no compiler); guard step "
          f"{guard_seconds:.1f} s, apt-get install (a) {seconds_a:.1f} s, (b) {seconds_b:.1f} s, (c) reinstall with "
          f"the module over https {seconds_c:.1f} s")
