"""nfs_mount's decisions from probe output in the format scripts/nfs_mount.sh prints (its real runs are in
test_nfs_script.py and test_nfs_lab.py): remounts, busy refusals, automount, noresvport, absent, install.

These cover what the lab cannot show for real: its kernel has no NFS client, so no share is ever mounted there.
"""

from __future__ import annotations

import base64

import pytest

from gpunode.facts.model import Facts, OsInfo
from gpunode.inventory import Host
from gpunode.steps import StepContext, StepFailed, build_step
from gpunode.steps.nfs.fstab import edit
from gpunode.steps.nfs.state import parse_state
from gpunode.steps.probe import ProbeOutput
from tests.test_nfs_options import EFS_LIVE

SERVER = "fs-1.efs.us-east-1.amazonaws.com"
ARGS = {"server": SERVER, "export": "/", "path": "/mnt/efs", "vendor": "aws-efs"}
USER_FSTAB = "UUID=1 / ext4 defaults 0 1\n"


def step(**extra):
    return build_step("nfs_mount", {**ARGS, **extra})


def probe_output(state_lines: list[str], fstab: str | None, installed: bool = True) -> ProbeOutput:
    if fstab is None:
        fstab_probe = "absent\n"
    else:
        fstab_probe = f"present\n644 root root\nbase64:{base64.b64encode(fstab.encode()).decode()}\n"  # as probed
    pkg = "nfs-common\tii \t1:2.6.2-4\n" if installed else ""
    return ProbeOutput({"state": "\n".join(state_lines) + "\n", "fstab": fstab_probe, "pkg.installed": pkg,
                        "pkg.lists": "9\n1795316241\n1795316250\n"})


def plan(the_step, state_lines: list[str], fstab: str | None = USER_FSTAB, installed: bool = True,
         check: bool = False) -> tuple[list[str], list[str]]:
    """(action summaries, notes). Planning reads only facts and probe output: no connection is needed."""
    ctx = StepContext(Host("gpu-1", "10.0.0.5"), Facts(os=OsInfo(package_manager="apt")), None,  # type: ignore[arg-type]
                      check, probe_output(state_lines, fstab, installed))
    return [a.summary for a in the_step.plan(ctx)], ctx.notes


PREFLIGHT_OK = ["dns ok 172.31.7.20", "port 2049 open", "kernel module"]
TAIL = ["systemd yes", "findmnt verify"]


def mounted(options: str = EFS_LIVE, source: str = f"{SERVER}:/", users=(), conns=()) -> list[str]:
    return [*PREFLIGHT_OK, f"mount {source} nfs4 {options}", *(f"user {u}" for u in users),
            "addr 172.31.7.20", *(f"conn {c} 172.31.7.20:2049" for c in conns), "path dir", *TAIL]


def test_a_converged_host_plans_nothing():
    converged = edit(USER_FSTAB, "/mnt/efs", step().line)
    assert plan(step(), mounted(conns=["172.31.5.9:40122"]), converged) == ([], [])


def test_a_first_run_installs_writes_fstab_mounts_and_verifies():
    summaries, notes = plan(step(), [*PREFLIGHT_OK, "path missing", *TAIL], installed=False)
    assert notes == ["NFSv4: / is checked by the mount itself (v4 servers such as EFS do not answer showmount)"]
    assert summaries == ["install the NFS client (nfs-common)", "create the mount point /mnt/efs",
                         "update /etc/fstab", f"mount {SERVER}:/ on /mnt/efs",
                         "verify /mnt/efs is mounted with the planned options"]


def test_changed_options_remount_unless_the_share_is_busy():
    old = step(options="timeo=300")
    fstab = edit(USER_FSTAB, "/mnt/efs", old.line)
    live = EFS_LIVE.replace("timeo=600", "timeo=300")
    summaries, notes = plan(step(), mounted(live), fstab)
    assert summaries == ["update /etc/fstab", "unmount /mnt/efs", f"mount {SERVER}:/ on /mnt/efs",
                         "verify /mnt/efs is mounted with the planned options"]
    assert "/mnt/efs is remounted: timeo=300 (wanted 600)" in notes
    with pytest.raises(StepFailed, match=r"busy; in use by \(pid command\): 4242 \(python3\), 77 \(bash\); nothing"):
        plan(step(), mounted(live, users=["4242 python3", "77 bash"]), fstab)


def test_another_share_on_the_mount_point_is_never_unmounted():
    with pytest.raises(StepFailed, match="already has 10.0.0.9:/data \\(nfs4\\) mounted, not"):
        plan(step(), mounted(source="10.0.0.9:/data"))


def test_noresvport_not_in_effect_is_reported():
    converged = edit(USER_FSTAB, "/mnt/efs", step().line)
    with pytest.raises(StepFailed, match="noresvport is not in effect: .* reserved local ports \\(172.31.5.9:791\\)"):
        plan(step(), mounted(conns=["172.31.5.9:791", "172.31.5.9:40122"]), converged)


def test_automount_arms_the_unit_and_switching_modes_remounts():
    summaries, _ = plan(step(automount=True), [*PREFLIGHT_OK, "path dir", *TAIL])
    assert summaries == ["update /etc/fstab", f"arm the automount on /mnt/efs and mount {SERVER}:/ once",
                         "verify /mnt/efs is mounted with the planned options"]
    direct = edit(USER_FSTAB, "/mnt/efs", step().line)
    summaries, notes = plan(step(automount=True), mounted(), direct)
    assert summaries[:3] == ["update /etc/fstab", "unmount /mnt/efs",
                             f"arm the automount on /mnt/efs and mount {SERVER}:/ once"]
    assert "/mnt/efs is remounted: automount wanted" in notes
    armed = edit(USER_FSTAB, "/mnt/efs", step(automount=True).line)
    idle = [*PREFLIGHT_OK, "mount systemd-1 autofs rw,relatime,fd=45,pgrp=1,timeout=0,direct", "path dir", *TAIL]
    assert plan(step(automount=True), idle, armed)[0] == []  # armed, not accessed yet: converged


def test_absent_unmounts_then_removes_the_line():
    fstab = edit(USER_FSTAB, "/mnt/efs", step(automount=True).line)
    armed = ["kernel module", "mount systemd-1 autofs rw,relatime,direct", f"mount {SERVER}:/ nfs4 {EFS_LIVE}",
             "path dir", *TAIL]
    assert plan(step(state="absent"), armed, fstab)[0] == [
        "unmount /mnt/efs", "update /etc/fstab", "reload systemd's view of fstab"]
    assert plan(step(state="absent"), ["kernel module", "path dir", *TAIL])[0] == []


def test_nfs3_export_is_checked_after_the_client_is_installed():
    v3 = build_step("nfs_mount", {"server": "10.0.0.9", "export": "/data", "path": "/mnt/d", "nfs_version": "3",
                                  "fstab_only": True})
    lines = ["dns ok 10.0.0.9", "port 2049 open", "port 111 open", "showmount absent", "kernel none 6.1",
             "path dir", *TAIL]
    summaries, notes = plan(v3, lines, installed=False, check=True)
    assert summaries[:2] == ["install the NFS client (nfs-common)", "check that 10.0.0.9 exports /data"]
    assert "the export list of 10.0.0.9 is checked after nfs-common is installed" in notes


def test_verify_after_mounting_names_what_differs():
    efs = step()
    with pytest.raises(StepFailed, match="not with the planned options: soft \\(wanted hard\\)"):
        efs._verify(parse_state("\n".join(mounted(EFS_LIVE.replace("hard", "soft")))))
    with pytest.raises(StepFailed, match="does not show"):
        efs._verify(parse_state("path dir"))
    efs._verify(parse_state("\n".join(mounted(conns=["172.31.5.9:40122"]))))  # all good: no exception


def test_v4_fstab_only_asks_the_export_list_before_making_the_mount_point():
    """Trial of issue 29: `--fstab-only` with a wrong NFSv4 export said 'nothing was changed' after it had made the
    mount point; and a converged run said the export 'is checked by the mount itself' where no mount follows."""
    v4 = build_step("nfs_mount", {"server": "10.0.0.9", "export": "/data", "path": "/mnt/d", "fstab_only": True})
    lines = ["dns ok 10.0.0.9", "port 2049 open", "showmount ok", "kernel none 6.1", "path missing", *TAIL]
    summaries, notes = plan(v4, lines)
    assert summaries[:2] == ["check that 10.0.0.9 exports /data", "create the mount point /mnt/d"]
    assert not any("checked by the mount itself" in note for note in notes)
