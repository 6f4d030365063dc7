"""nfs_mount on real lab hosts against the lab's NFS server (nfs-ganesha): preflight, fstab, mount, absent.

The lab hosts' kernel has no NFS client, so a real NFS mount cannot succeed here: the tests show that this is
reported clearly with fstab untouched, manage fstab with --fstab-only, and let a tmpfs named like the share
stand in for a mounted share where unmounting is tested. Real mounts are the opt-in VM suite's job.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from gpunode.steps.nfs.fstab import marker
from tests.conftest import host_inventory, host_iptables, run_cli

pytestmark = pytest.mark.lab

CLIENT_INDEX = 90           # a host of this module's own (the session hosts stay untouched)
USER_FSTAB = b"# /etc/fstab: user lines that gpunode must keep byte for byte\n" \
             b"UUID=0a1b2c3d-1111 /scratch\txfs  defaults,nofail 0 2   \n"


@pytest.fixture(scope="module")
def client(lab):
    host = lab.add_host(CLIENT_INDEX)
    yield host
    lab.remove_host(host.name)


@pytest.fixture
def fstab(client):
    """The client's /etc/fstab set to USER_FSTAB (and old backups removed); returns its path from outside."""
    path = client.root / "etc" / "fstab"
    for old in path.parent.glob("fstab.*.gpunode.bak"):
        old.unlink()
    path.write_bytes(USER_FSTAB)
    return path


def ensure_client_tools(host) -> None:
    """nfs-common in the host (showmount), for tests that do not watch the step install it."""
    done = host.run_inside("dpkg -s nfs-common >/dev/null 2>&1 || { apt-get -q update >/dev/null && "
                           "DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends nfs-common"
                           " >/dev/null; }", timeout=600)
    assert done.returncode == 0, done.stderr


def mount_nfs(lab, host, tmp_path, *args: str, server: str | None = None, export: str = "/export",
              path: str = "/mnt/data"):
    """Run `gpunode mount-nfs` on one host; returns (cli result, the host's entry of the JSON report)."""
    inventory = host_inventory(lab, [host], tmp_path / "inv.yml")
    report = tmp_path / "report.json"
    report.unlink(missing_ok=True)
    result = run_cli("mount-nfs", host.name, "-i", str(inventory), "--server", server or lab_nfs_address(lab),
                     "--export", export, "--path", path, "--json-report", str(report), *args)
    hosts = json.loads(report.read_text())["hosts"] if report.exists() else [{}]
    return result, hosts[0]


def lab_nfs_address(lab) -> str:
    from gpunode.lab.nfs import NFS_INDEX

    return lab.network.address(NFS_INDEX)


def firewall_drop(lab, host, address: str, port: int):
    """Drop the host's TCP traffic to address:port in its network namespace, like a security group would."""
    return host_iptables(lab, host, "OUTPUT", "-d", address, "-p", "tcp", "--dport", str(port), "-j", "DROP")


def test_lab_nfs_server_serves_nfs3_and_nfs4(lab, nfs_server):
    services = nfs_server.rpcinfo()
    assert "100003    3   tcp   2049  nfs" in services and "100003    4   tcp   2049  nfs" in services
    assert "mountd" in services and "100000    4   tcp    111  portmapper" in services
    (nfs_server.export_dir / "hello.txt").write_text("hello\n")
    netns = ["ip", "netns", "exec", lab.network.netns_name(next(iter(lab.hosts)))]
    exports = subprocess.run([*netns, "showmount", "-e", "--no-headers", nfs_server.address],
                             capture_output=True, text=True, timeout=30)
    assert exports.stdout.split() == ["/export", "(everyone)"], exports.stderr
    for url in (f"nfs://{nfs_server.address}/export", f"nfs://{nfs_server.address}/export?version=4"):
        listing = subprocess.run([*netns, "nfs-ls", url], capture_output=True, text=True, timeout=30)
        assert "hello.txt" in listing.stdout, (url, listing.stderr)


def test_installs_the_client_then_finds_a_wrong_export_before_touching_fstab(lab, client, nfs_server, fstab,
                                                                             tmp_path):
    client.run_inside("apt-get remove -y -q nfs-common >/dev/null 2>&1", timeout=300)
    result, report = mount_nfs(lab, client, tmp_path, "--nfs-version", "3", "--fstab-only", export="/wrong")
    assert result.code == 1, result.output
    step = report["steps"][0]
    assert step["actions"][0]["summary"] == "install the NFS client (nfs-common)"
    assert "wrong export path" in report["error"] and "does not export /wrong; it exports: /export" in report["error"]
    assert "nothing was changed" in report["error"]
    assert client.run_inside("dpkg -s nfs-common").returncode == 0
    assert fstab.read_bytes() == USER_FSTAB
    assert not list(fstab.parent.glob("fstab.*.gpunode.bak"))


def test_preflight_passes_for_the_real_export_and_names_each_failure(lab, client, nfs_server, fstab, tmp_path):
    ensure_client_tools(client)
    for version in ("3", "4.1"):
        ok, report = mount_nfs(lab, client, tmp_path, "--nfs-version", version, "--fstab-only", "--check")
        assert ok.code == 0 and report["status"] == "would-change", ok.output

    wrong, report = mount_nfs(lab, client, tmp_path, "--nfs-version", "3", "--check", export="/nope")
    assert wrong.code == 1 and report["error"].startswith("wrong export path: ")
    other_host = next(iter(lab.hosts.values())).address  # a host with no NFS server: port 2049 closed
    closed, report = mount_nfs(lab, client, tmp_path, "--check", server=other_host)
    assert closed.code == 1 and f"{other_host} refused TCP 2049 (NFS)" in report["error"]
    dns, report = mount_nfs(lab, client, tmp_path, "--check", server="nas-0a1b.invalid")
    assert dns.code == 1 and report["error"] == "DNS: this host cannot resolve the NFS server name 'nas-0a1b.invalid'"
    assert "resolver" in report["fix"]
    with firewall_drop(lab, client, nfs_server.address, 2049):
        dropped, report = mount_nfs(lab, client, tmp_path, "--check")
    assert dropped.code == 1 and report["error"].startswith("security group / firewall: no answer from ")
    assert "TCP 2049 (NFS)" in report["error"] and "security group" in report["fix"]
    with firewall_drop(lab, client, nfs_server.address, 111):
        rpcbind, report = mount_nfs(lab, client, tmp_path, "--nfs-version", "3", "--check")
    assert rpcbind.code == 1 and "TCP 111 (rpcbind, needed by NFSv3)" in report["error"]
    assert "fix:" in rpcbind.stdout and "log:" in rpcbind.stdout
    assert fstab.read_bytes() == USER_FSTAB


def test_fstab_line_written_once_replaced_in_place_and_removed(lab, client, nfs_server, fstab, tmp_path):
    ensure_client_tools(client)
    args = ("--nfs-version", "3", "--fstab-only")
    first, report = mount_nfs(lab, client, tmp_path, *args)
    assert first.code == 0 and report["status"] == "changed", first.output
    line = (f"{nfs_server.address}:/export /mnt/data nfs vers=3,proto=tcp,hard,timeo=600,retrans=2,_netdev,nofail,"
            "x-systemd.mount-timeout=30 0 0")
    assert fstab.read_bytes() == USER_FSTAB + f"{marker('/mnt/data')}\n{line}\n".encode()
    backups = list(fstab.parent.glob("fstab.*.gpunode.bak"))
    assert [b.read_bytes() for b in backups] == [USER_FSTAB]
    assert client.run_inside("test -d /mnt/data").returncode == 0

    second, report = mount_nfs(lab, client, tmp_path, *args)
    assert second.code == 0 and report["status"] == "ok" and report["changed"] == 0, second.output
    assert report["exec_count"] == 1  # lock + facts + the batched probe, one session: nothing else
    assert len(list(fstab.parent.glob("fstab.*.gpunode.bak"))) == 1

    third, report = mount_nfs(lab, client, tmp_path, *args, "--options", "timeo=300,nconnect=2")
    assert third.code == 0 and report["status"] == "changed", third.output
    changed = line.replace("timeo=600", "timeo=300").replace("_netdev", "_netdev,nconnect=2")
    assert fstab.read_bytes() == USER_FSTAB + f"{marker('/mnt/data')}\n{changed}\n".encode()

    removed, report = mount_nfs(lab, client, tmp_path, "--fstab-only", "--absent")
    assert removed.code == 0 and report["status"] == "changed", removed.output
    assert fstab.read_bytes() == USER_FSTAB


def test_a_foreign_line_for_the_mount_point_is_reported_not_overwritten(lab, client, nfs_server, fstab, tmp_path):
    ensure_client_tools(client)
    foreign = USER_FSTAB + b"old-filer:/vol1 /mnt/data nfs defaults 0 0\n"
    fstab.write_bytes(foreign)
    result, report = mount_nfs(lab, client, tmp_path, "--fstab-only")
    assert result.code == 1
    assert "already mounts /mnt/data with a line gpunode did not write (line 3: " in report["error"]
    assert "hand it to gpunode" in report["fix"]
    assert fstab.read_bytes() == foreign


def test_a_kernel_without_nfs_client_fails_clearly_and_fstab_stays(lab, client, nfs_server, fstab, tmp_path):
    ensure_client_tools(client)
    for check in (("--check",), ()):
        result, report = mount_nfs(lab, client, tmp_path, *check)
        assert result.code == 1, result.output
        assert report["error"].startswith("this kernel has no NFS client (nfs module missing): ")
        assert "exit" not in report["error"] and "CONFIG_NFS_FS" in report["fix"]
        assert fstab.read_bytes() == USER_FSTAB
    assert "this kernel has no NFS client" in result.stdout


def test_a_mount_that_fails_after_fstab_was_written_puts_fstab_back(lab, client, nfs_server, fstab, tmp_path):
    """An nfs module that modprobe finds but the kernel refuses: planning passes, the mount itself fails."""
    ensure_client_tools(client)
    fake = ('K=$(uname -r); test ! -e /lib/modules || exit 9; mkdir -p /lib/modules/$K/kernel/fs/nfs && '
            ': > /lib/modules/$K/kernel/fs/nfs/nfs.ko && depmod $K 2>/dev/null; modprobe -n nfs')
    assert client.run_inside(fake).returncode == 0
    try:
        result, report = mount_nfs(lab, client, tmp_path, "--nfs-version", "3")
    finally:
        client.run_inside("rm -rf /lib/modules")
    assert result.code == 1, result.output
    actions = [a["summary"] for a in report["steps"][0]["actions"]]
    assert actions.index("update /etc/fstab") < actions.index(f"mount {nfs_server.address}:/export on /mnt/data")
    assert report["error"].startswith("this kernel has no NFS client (nfs module missing): ")
    assert "modprobe nfs failed" in report["error"] and "/etc/fstab was put back" in report["error"]
    assert fstab.read_bytes() == USER_FSTAB
    assert len(list(fstab.parent.glob("fstab.*.gpunode.bak"))) == 1  # the write made its backup first


def test_absent_refuses_while_busy_then_unmounts_and_removes_the_line(lab, client, nfs_server, fstab, tmp_path):
    ensure_client_tools(client)
    written, _ = mount_nfs(lab, client, tmp_path, "--fstab-only", path="/mnt/busy")
    assert written.code == 0, written.output
    with_line = fstab.read_bytes()
    source = f"{nfs_server.address}:/export"
    stand_in = client.run_inside(f"mount -t tmpfs {source} /mnt/busy && cd /mnt/busy && "
                                 "{ sleep 300 </dev/null >/dev/null 2>&1 & echo $!; }")
    assert stand_in.returncode == 0, stand_in.stderr
    pid = int(stand_in.stdout.strip())
    try:
        busy, report = mount_nfs(lab, client, tmp_path, "--absent", path="/mnt/busy")
        assert busy.code == 1
        assert report["error"] == (f"/mnt/busy is busy, not unmounting it; in use by (pid command): {pid} (sleep); "
                                   "nothing was changed")
        assert fstab.read_bytes() == with_line
        assert source in client.run_inside("cat /proc/self/mounts").stdout
    finally:
        client.run_inside(f"kill {pid}")
    done, report = mount_nfs(lab, client, tmp_path, "--absent", path="/mnt/busy")
    assert done.code == 0 and report["status"] == "changed", done.output
    assert [a["summary"] for a in report["steps"][0]["actions"]][:2] == ["unmount /mnt/busy", "update /etc/fstab"]
    assert source not in client.run_inside("cat /proc/self/mounts").stdout
    assert fstab.read_bytes() == USER_FSTAB


def test_nfs_playbook_renders_from_variables(lab, client, nfs_server, fstab, tmp_path):
    ensure_client_tools(client)
    inventory = host_inventory(lab, [client], tmp_path / "inv.yml", nfs_server=nfs_server.address,
                               nfs_export="/export", nfs_path="/mnt/pb", nfs_vendor="alibaba-nas")
    result = run_cli("provision", "-i", str(inventory), "--playbook", "playbooks/nfs.yml", "--check",
                     "--var", "nfs_fstab_only=true")
    assert result.code == 0, result.output
    shown = result.stdout.replace("\n", "")
    assert (f"+{nfs_server.address}:/export /mnt/pb nfs vers=3,nolock,proto=tcp,rsize=1048576,wsize=1048576,hard,"
            "timeo=600,retrans=2,_netdev,noresvport,nofail,x-systemd.mount-timeout=30 0 0") in shown
    assert fstab.read_bytes() == USER_FSTAB


def test_bad_options_are_usage_errors_before_any_host_is_touched(lab, client, tmp_path):
    result, _ = mount_nfs(lab, client, tmp_path, "--vendor", "aws-efs", "--nfs-version", "3", server="fs-1")
    assert result.code == 2 and "aws-efs supports NFS 4.0 and 4.1, not 3" in result.stderr
    missing = run_cli("mount-nfs", client.name, "--server", "nas")
    assert missing.code == 2 and "needs --export, --path" in missing.stderr
