"""`nfs_mount`: mount Alibaba NAS, Tencent CFS, AWS EFS or plain NFS exports, safely and idempotently.

Order on a host: install the client, preflight (DNS, ports, export), write gpunode's fstab line atomically
(backed up, validated), mount from that line, verify the live options. A failed mount puts fstab back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from gpunode.connection import join, q
from gpunode.facts import Facts
from gpunode.scripts import script_text
from gpunode.steps.base import Action, Step, StepContext, StepFailed, arg, register
from gpunode.steps.nfs.fstab import FstabConflict, edit, entry_line, marker, normalize
from gpunode.steps.nfs.options import (
    DEFAULT_VERSION,
    VENDORS,
    VERSIONS,
    Options,
    boot_options,
    live_differences,
    merge,
    parse_options,
    preset,
    render,
    version_of,
)
from gpunode.steps.nfs.preflight import export_problem, preflight_problem
from gpunode.steps.nfs.state import NfsState, parse_state, reserved_port_connections
from gpunode.steps.pkgmgr import Wanted, manager_for
from gpunode.steps.probe import ProbeOutput, Snippets, nested
from gpunode.steps.remote_file import FileState, parse_file_probe, probe_file, write_action

FSTAB = "/etc/fstab"
CLIENT_PACKAGE = {"apt": "nfs-common", "dnf": "nfs-utils", "yum": "nfs-utils"}
_SERVER = re.compile(r"^[A-Za-z0-9._\-]+\Z|^\[?[0-9A-Fa-f:.]+\]?\Z")
_SAFE_PATH = re.compile(r"^/[A-Za-z0-9._+@=,/ -]*\Z")


@register
@dataclass
class NfsMountStep(Step):
    """Mount `server:export` on `path` (or, with state absent, unmount it and remove gpunode's fstab line)."""

    kind = "nfs_mount"
    facts_sections = frozenset({"pkgmgr", "packages", "storage"})
    server: str = arg(doc="the NFS server's name or address")
    export: str = arg(doc="the exported path on the server")
    path: str = arg(doc="the mount point (absolute)")
    vendor: Literal["generic", "alibaba-nas", "tencent-cfs", "aws-efs"] = arg("generic", "the vendor preset of "
                                                                              "mount options")
    nfs_version: str | None = arg(None, "3, 4.0, 4.1; none: the vendor preset's")
    options: str = arg("", "mount options that override the preset's one by one")
    automount: bool = arg(False, "mount on first access (x-systemd.automount)")
    boot_required: bool = arg(False, "the boot waits for this mount and fails without it (no nofail)")
    state: Literal["present", "absent"] = arg("present", "absent: unmount and remove gpunode's fstab line")
    fstab_only: bool = arg(False, "write the fstab line only, mount nothing (images being baked)")
    preflight: bool = arg(True, "check name, ports and export before mounting")
    write_test: bool = arg(False, "write and remove a file on the mounted share")
    timeout: int = arg(5, "seconds for each preflight check")

    def __post_init__(self) -> None:
        if self.vendor not in VENDORS:
            raise ValueError(f"nfs_mount.vendor must be one of {', '.join(VENDORS)}, got {self.vendor!r}")
        if not _SERVER.match(self.server or ""):
            raise ValueError(f"nfs_mount.server must be a host name or an IP address, got {self.server!r}")
        self.server = self.server.strip("[]")
        if not self.export.startswith("/") or not _SAFE_PATH.match(self.export) or " " in self.export:
            raise ValueError(f"nfs_mount.export must be an absolute path like /data, got {self.export!r}")
        if not _SAFE_PATH.match(self.path) or normalize(self.path) == "/":
            raise ValueError(f"nfs_mount.path must be an absolute path other than / "
                             f"(letters, digits, . _ + @ = , - and spaces), got {self.path!r}")
        self.path = normalize(self.path)
        self.export = normalize(self.export)
        version = str(self.nfs_version) if self.nfs_version is not None else DEFAULT_VERSION[self.vendor]
        if version not in VERSIONS:
            raise ValueError(f"nfs_mount.nfs_version must be one of {', '.join(VERSIONS)}, got {version!r}")
        self.nfs_version = version
        if self.vendor == "tencent-cfs" and version == "3" and self.export == "/":
            raise ValueError("Tencent CFS over NFSv3 exports /<fsid> (the file system ID in the console), not /; "
                             "use that export or nfs_version 4.0")
        self.mount_options: Options = merge(preset(self.vendor, version), parse_options(self.options))
        if self.automount and "x-systemd.automount" not in dict(self.mount_options):
            self.mount_options.append(("x-systemd.automount", None))
        self.mount_options = boot_options(self.mount_options, self.boot_required)
        if not 1 <= self.timeout <= 120:
            raise ValueError(f"nfs_mount.timeout must be 1 to 120 seconds, got {self.timeout}")

    # ---- derived ---------------------------------------------------------------------------------
    @property
    def source(self) -> str:
        host = f"[{self.server}]" if ":" in self.server else self.server
        return f"{host}:{self.export}"

    @property
    def line(self) -> str:
        """gpunode's fstab line for this mount."""
        return entry_line(self.source, self.path, "nfs", render(self.mount_options))

    @property
    def v3(self) -> bool:
        return version_of(self.mount_options).startswith("3")

    def same_source(self, live: str) -> bool:
        host, _, export = live.rpartition(":")
        return host.strip("[]").lower() == self.server.lower() and normalize(export) == self.export

    def _script(self, *args: object) -> str:
        return f"bash -c {q(script_text('nfs_mount.sh'))} nfs_mount.sh {join(args)}"

    def _probe_command(self, preflight: bool) -> str:
        return self._script("probe", self.server, self.path, int(self.v3), int(preflight), self.timeout)

    # ---- probe and plan --------------------------------------------------------------------------
    def probe(self, facts: Facts) -> Snippets:
        present = self.state == "present"
        snippets = {"state": self._probe_command(present and self.preflight), "fstab": probe_file(FSTAB)}
        if present and facts.os.package_manager in CLIENT_PACKAGE:
            package = CLIENT_PACKAGE[facts.os.package_manager]
            snippets.update(nested("pkg", manager_for(facts.os.package_manager).probe([package])))
        return snippets

    def _client_package(self, facts: Facts) -> str:
        manager = facts.os.package_manager or ""
        if manager not in CLIENT_PACKAGE:
            raise StepFailed(f"no NFS client package known for package manager {manager or 'none'}",
                             fix="install the NFS client yourself; supported: apt, dnf, yum")
        return CLIENT_PACKAGE[manager]

    def plan(self, ctx: StepContext) -> list[Action]:
        state = parse_state(ctx.probe["state"])
        fstab = parse_file_probe(ctx.probe["fstab"])
        self._roles: dict[int, str] = {}
        self._fstab_change: tuple[FileState, str] | None = None
        if self.state == "absent":
            return self._plan_absent(ctx, state, fstab)
        actions = self._client_and_preflight(ctx, state, ctx.probe.within("pkg"))
        if not self.fstab_only and state.kernel == "none":
            raise StepFailed(
                f"this kernel has no NFS client (nfs module missing): {state.kernel_release or 'the running kernel'}"
                " has no nfs in /proc/filesystems and no nfs module to load; nothing was changed",
                fix="install the kernel's NFS module (Ubuntu: linux-modules-extra-$(uname -r)) or boot a kernel "
                    "built with CONFIG_NFS_FS; or only write fstab (--fstab-only, fstab_only: true)")
        new_text = self._edited(fstab, self.line)
        remount = self._needs_remount(ctx, state)
        if state.path == "other":
            raise StepFailed(f"{self.path} exists and is not a directory", fix="remove it or choose another path")
        fstab_changed = not fstab.exists or new_text != fstab.content
        if fstab_changed and self.fstab_only and not self.v3 and self.preflight:
            # no mount follows to prove the export: ask the server's export list before writing the line (and
            # before the mount point is made: a refused export leaves nothing behind)
            actions.append(self._role(Action(
                f"check that {self.server} exports {self.export}", "fstab only: no mount will check the export",
                self._script("exports", self.server, self.timeout), changes=False), "exports-v4"))
        if state.path == "missing":
            actions.append(Action(f"create the mount point {self.path}", "it does not exist",
                                  f"mkdir -p -- {q(self.path)}"))
        if fstab_changed:
            actions.append(self._fstab_action(fstab, new_text, state))
        mounting = self._mount_actions(state, remount, fstab_changed)
        actions += mounting
        if fstab_changed and state.systemd and not mounting:
            actions.append(Action("reload systemd's view of fstab", "fstab changed",
                                  "systemctl daemon-reload", changes=False))
        if self.write_test and not self.fstab_only:
            actions.append(self._role(Action(f"write and read back a file on {self.path}", "write_test: true",
                                             self._script("write-test", self.path), timeout=90, changes=False),
                                      "write-test"))
        return actions

    def _client_and_preflight(self, ctx: StepContext, state: NfsState, pkg_output: ProbeOutput) -> list[Action]:
        actions = []
        package = self._client_package(ctx.facts)
        manager = manager_for(ctx.facts.os.package_manager)
        packages = manager.parse(pkg_output)
        if package not in packages.installed:
            stale = packages.cache_age_seconds is None or packages.cache_age_seconds > 3600
            actions.append(self._role(Action(
                f"install the NFS client ({package})", f"{package} is not installed",
                manager.install([Wanted(package)], refresh=stale, recommends=False), timeout=1800,
                installs=(package,),
                fix="check the package repositories and network access to the mirror"), "install"))
        if not self.preflight:
            return actions
        problem = preflight_problem(state, self.server, self.export, self.v3, self.timeout)
        if problem:
            raise StepFailed(problem[0], fix=problem[1])
        if self.v3 and state.showmount == "absent":
            actions.append(self._role(Action(
                f"check that {self.server} exports {self.export}", "showmount comes with the NFS client",
                self._script("exports", self.server, self.timeout), changes=False), "exports"))
            if ctx.check:
                ctx.notes.append(f"the export list of {self.server} is checked after {package} is installed")
        elif not self.v3 and state.share is None and not self.fstab_only:  # fstab only: plan() checks the list
            ctx.notes.append(f"NFSv4: {self.export} is checked by the mount itself (v4 servers such as EFS "
                             "do not answer showmount)")
        return actions

    def _edited(self, fstab: FileState, line: str | None) -> str:
        try:
            return edit(fstab.content if fstab.exists else "", self.path, line)
        except FstabConflict as exc:
            raise StepFailed(f"{FSTAB}: {exc}", fix=exc.fix) from None

    def _needs_remount(self, ctx: StepContext, state: NfsState) -> bool:
        """True when the share is mounted the wrong way and must be unmounted first (refused while busy)."""
        share = state.share
        if self.fstab_only:
            return False
        if share and not self.same_source(share.source):
            raise StepFailed(f"{self.path} already has {share.source} ({share.fstype}) mounted, not {self.source}",
                             fix=f"unmount {self.path} (or choose another path), then run again")
        reasons = live_differences(self.mount_options, share.options) if share else []
        if state.autofs != self.automount and (share or state.autofs):
            reasons.append("automount wanted" if self.automount else "automount no longer wanted")
        if not reasons:
            if share and "noresvport" in dict(self.mount_options):
                reserved = reserved_port_connections(state)
                if reserved:
                    raise StepFailed(_reserved_message(self.server, reserved), fix=_RESERVED_FIX)
            return False
        if state.users:
            raise StepFailed(f"{self.path} must be remounted ({'; '.join(reasons)}) but is busy; in use by "
                             f"(pid command): {state.users_text()}; nothing was changed",
                             fix="stop those processes (or let them finish), then run again")
        ctx.notes.append(f"{self.path} is remounted: {'; '.join(reasons)}")
        return True

    def _mount_actions(self, state: NfsState, remount: bool, fstab_changed: bool) -> list[Action]:
        if self.fstab_only:
            return []
        actions = []
        if remount:
            actions.append(self._unmount_action("mounted with other options"))
        if self.automount:
            rearm = remount or not state.autofs or (fstab_changed and state.share is None)
            if rearm:
                actions.append(self._role(Action(
                    f"arm the automount on {self.path} and mount {self.source} once", "x-systemd.automount",
                    self._script("automount", self.path), timeout=300), "automount"))
        elif remount or state.share is None:
            actions.append(self._role(Action(f"mount {self.source} on {self.path}",
                                             "remount with the new options" if remount else "not mounted",
                                             self._script("mount", self.path), timeout=300), "mount"))
        if actions:
            actions.append(self._role(Action(f"verify {self.path} is mounted with the planned options",
                                             "after mounting", self._probe_command(False), changes=False),
                                      "verify"))
        return actions

    def _unmount_action(self, reason: str) -> Action:
        return self._role(Action(f"unmount {self.path}", reason, self._script("unmount", self.path), timeout=120),
                          "unmount")

    def _fstab_action(self, fstab: FileState, new_text: str, state: NfsState) -> Action:
        self._fstab_change = (fstab, new_text)
        present = self.state == "present"
        if present:
            checks = [f'n=$(grep -cxF -- {q(self.line)} "$1"); [ "$n" = 1 ] || '
                      '{ echo "expected gpunode'"'"'s line once, found $n" >&2; exit 1; }']
            if state.findmnt == "verify":
                checks.append(f't=$(mktemp) && printf "%s\\n" {q(self.line)} > "$t" && '
                              'timeout 30 findmnt --verify --tab-file "$t"; rc=$?; rm -f "$t"; exit $rc')
        else:
            checks = [f'! grep -qxF -- {q(marker(self.path))} "$1"']
        action = write_action(FSTAB, fstab, new_text, backup=True, validate="; ".join(checks),
                              reason=("options changed" if fstab.exists and marker(self.path) in fstab.content
                                      else f"no line for {self.path} yet") if present
                              else f"gpunode's line for {self.path} is present")
        return self._role(action, "fstab")

    def _plan_absent(self, ctx: StepContext, state: NfsState, fstab: FileState) -> list[Action]:
        new_text = self._edited(fstab, None)
        actions = []
        share = state.share
        if not self.fstab_only and (state.autofs or (share and self.same_source(share.source))):
            if state.users:
                raise StepFailed(f"{self.path} is busy, not unmounting it; in use by (pid command): "
                                 f"{state.users_text()}; nothing was changed",
                                 fix="stop those processes (or let them finish), then run again")
            actions.append(self._unmount_action("state: absent"))
        elif share and not self.fstab_only:
            ctx.notes.append(f"{self.path} has {share.source} mounted, not {self.source}: left alone")
        if fstab.exists and new_text != fstab.content:
            actions.append(self._fstab_action(fstab, new_text, state))
            if state.systemd:
                actions.append(Action("reload systemd's view of fstab", "fstab changed", "systemctl daemon-reload",
                                      changes=False))
        return actions

    def _role(self, action: Action, role: str) -> Action:
        self._roles[id(action)] = role
        return action

    # ---- apply -----------------------------------------------------------------------------------
    def apply(self, ctx: StepContext, actions: list[Action]) -> None:
        """Run the actions in order; when mounting fails after fstab was written, put the old fstab back."""
        written = False
        for action in actions:
            if action.command is None:
                continue
            role = self._roles.get(id(action), "")
            result = ctx.run(action.command, stdin=action.stdin, timeout=action.timeout, label=action.summary)
            if not result.ok:
                cause, fix = _explain(action, result.stdout + "\n" + result.stderr, result.exit_code)
                if written and role in ("mount", "automount", "unmount"):
                    cause += "\n" + self._restore_fstab(ctx)
                raise StepFailed(cause, fix=fix)
            if role == "fstab":
                written = True
            elif role == "exports":
                problem = export_problem(parse_state(result.stdout), self.server, self.export)
                if problem:
                    raise StepFailed(f"{problem[0]}; nothing was changed", fix=problem[1])
            elif role == "exports-v4":
                self._check_v4_export(ctx, parse_state(result.stdout))
            elif role == "verify":
                self._verify(parse_state(result.stdout))

    def _check_v4_export(self, ctx: StepContext, listed: NfsState) -> None:
        """Refuse an export the server's list rules out; say so when the server gives no list (EFS, v4-only)."""
        if listed.showmount == "ok":
            problem = export_problem(listed, self.server, self.export)
            if problem:
                raise StepFailed(f"{problem[0]}; nothing was changed",
                                 fix=f"{problem[1]} (an NFSv4 server may map other pseudo paths: if you are sure, "
                                 "skip the check with --no-preflight / preflight: false)")
            return
        ctx.notes.append(f"NFSv4: {self.server} gives no export list ({listed.showmount_error or 'no showmount'}); "
                         f"{self.export} is not verified until the first mount")

    def _restore_fstab(self, ctx: StepContext) -> str:
        assert self._fstab_change is not None
        before, written = self._fstab_change
        if before.exists:
            action = write_action(FSTAB, FileState(True, content=written), before.content, backup=False)
            result = ctx.run(action.command, stdin=action.stdin, label=f"restore {FSTAB}")
        else:
            result = ctx.run(f"rm -f -- {FSTAB}", label=f"remove the {FSTAB} this run created")
        if result.ok:
            return f"{FSTAB} was put back as it was before this run"
        return (f"putting {FSTAB} back failed too ({result.tail(3)}); "
                f"the previous version is in {FSTAB}.*.gpunode.bak")

    def _verify(self, state: NfsState) -> None:
        share = state.share
        if self.automount and share is None and state.autofs:
            return  # armed; the share mounts on first access
        if share is None or not self.same_source(share.source):
            raise StepFailed(f"after mounting, {self.path} does not show {self.source} "
                             f"(found: {share.source if share else 'nothing'})", fix="see the host log")
        diffs = live_differences(self.mount_options, share.options)
        if diffs:
            raise StepFailed(f"{self.path} is mounted, but not with the planned options: {'; '.join(diffs)} "
                             f"(live: {share.options})",
                             fix="another mount of the same server may share its connection settings: unmount "
                                 "all mounts of that server and run again")
        if "noresvport" in dict(self.mount_options):
            reserved = reserved_port_connections(state)
            if reserved:
                raise StepFailed(_reserved_message(self.server, reserved), fix=_RESERVED_FIX)


_RESERVED_FIX = ("unmount every mount of this server (the kernel shares one connection per server), "
                 "then run again so they all mount with noresvport")


def _reserved_message(server: str, reserved: list[str]) -> str:
    return (f"noresvport is not in effect: connections to {server}:2049 use reserved local ports "
            f"({', '.join(reserved)}), so a failover of the NAS can stall them")


def _explain(action: Action, output: str, exit_code: int) -> tuple[str, str]:
    """The cause and fix a script printed as `gpunode: ...` / `gpunode-fix: ...`, else the command's output."""
    causes = [ln[len("gpunode: "):] for ln in output.splitlines() if ln.startswith("gpunode: ")]
    fixes = [ln[len("gpunode-fix: "):] for ln in output.splitlines() if ln.startswith("gpunode-fix: ")]
    rest = [ln for ln in output.strip().splitlines()
            if ln.strip() and not ln.startswith(("gpunode: ", "gpunode-fix: "))]
    detail = "\n".join("    " + ln for ln in rest[-8:])
    if causes:
        return "; ".join(causes) + (f"\n{detail}" if detail else ""), (fixes[0] if fixes else action.fix)
    return f"{action.summary} failed (exit {exit_code}):\n{detail}", action.fix or "see the host log"
