"""The kernel guard's hooks: shell that the kernel packages run on the node when a kernel is installed later (by hand
or unattended), so that a kernel never becomes the boot default without its DKMS module.

Debian's kernel packages run every hook in /etc/kernel/postinst.d (image) and /etc/kernel/header_postinst.d
(headers) with run-parts, giving the kernel release as $1 and the image path as $2, the maintainer script's
arguments in $DEB_MAINT_PARAMS, and hooks must write to stderr only (Debian Linux Kernel Handbook, chapter 8.1
"Kernel hooks"; its URL is the source of tests/plans/kernel_guard.yaml's cache-relative-folder case). run-parts
runs them in the lexical order of their names (run-parts(8)). Debian's dkms installs its hook as `dkms` in both folders
(dkms-project/dkms@3f72c9b059bccbc1ca1ff8b431c1763b1bdb60cd (v3.0.10, Debian 12's) Makefile lines 52 and 63); it
runs `dkms_autoinstaller start $1`, i.e. `dkms autoinstall --kernelver $1` (kernel_postinst.d_dkms line 38,
dkms_autoinstaller line 53), which compiles. GRUB's hook is `zz-update-grub` (the grub2 packaging's install.in lines
1-2 and kernel/zz-update-grub in mxOBS/debian_grub2@71fc3f4834b3c8ac9c7e6f2a39cc9b18de74402b; on the lab's Debian 12
hosts `dpkg -S` names grub2-common), and the handbook (8.2) reserves `zz-` for boot loaders, which run last.

- `CACHE_HOOK` (`50-gpunode-module-cache`: "5" sorts before "d", so it runs before `dkms`): the module of every
  guarded DKMS module for the new kernel from the module cache (a folder on the node, e.g. an NFS mount, or an https
  URL), its package's sha256 checked against the manifest, installed with modcache/remote.py's shell (no compile).
  `dkms autoinstall` that runs next finds it installed and builds nothing. When the module is still missing, the
  boot default is kept now (`guard_boot`), before dkms tries to build: a failed build makes Debian's dkms hook exit
  11, and run-parts (--exit-on-error) then runs no later hook, neither `zz-update-grub` nor ours (seen on a lab host,
  dkms 3.0.10: "run-parts: /etc/kernel/postinst.d/dkms exited with return code 11", the kernel left half-configured).
- `KEEP_HOOK` (`zzz-gpunode-kernel-guard`: after `dkms` and `zz-update-grub`; it acts on the boot loader, as the
  handbook's boot loader hooks do): `guard_boot` again, which now releases the kept default when dkms built the
  module after all, and keeps it when dkms's hook passed without installing it (no headers, AUTOINSTALL off).

`guard_boot`: when the new kernel is the newest (GRUB's first entry) and `dkms status` does not say installed for
it, the boot default stays at a kernel that has the module (the running one when it does): `GRUB_DEFAULT=saved` in
/etc/default/grub.d/ (update-grub run once when it is new, not in a container, as zz-update-grub does not), and
`grub-set-default` with that kernel's menu entry id read from grub.cfg, the why in `STATE_FILE`, which verify-gpu
reads. The id is GRUB's 10_linux's: submenu `gnulinux-advanced-$boot_device_id`, entry
`gnulinux-$version-advanced-$boot_device_id`, joined with `>` (GRUB_DEFAULT's form for an entry in a submenu,
which 10_linux's own warning prints; mxOBS/debian_grub2@71fc3f4834b3c8ac9c7e6f2a39cc9b18de74402b
util/grub.d/10_linux.in lines 130, 132, 348; grub-set-default writes saved_entry with grub-editenv,
util/grub-set-default.in line 134; GRUB_DEFAULT=saved becomes `default="${saved_entry}"`, util/grub.d/00_header.in
line 39). When the newest kernel has its module (a later build, a later kernel), the saved entry is unset and the
drop-in removed (update-grub again): the GRUB_DEFAULT of /etc/default/grub holds again (0 by default: the newest).

Neither hook ever fails the kernel's installation (a failed hook would leave the package half-configured): each
says what it did on stderr and in `LOG_FILE`."""

from __future__ import annotations

import re

from gpunode.modcache.remote import hook_install_command
from gpunode.parsers.dkms import NVIDIA_MODULE_PATTERN

CONF_FILE = "/etc/gpunode/kernel-guard.conf"
SCRIPT = "/usr/lib/gpunode/kernel-guard"  # what the hooks run: one script, four hooks
STATE_FILE = "/var/lib/gpunode/kernel-guard.state"
LOG_FILE = "/var/log/gpunode-kernel-guard.log"
GRUB_DROPIN = "/etc/default/grub.d/gpunode-kernel-guard.cfg"
GRUB_DROPIN_CONTENT = ("# Written by gpunode's kernel guard: boot the entry grub-set-default saved (a kernel that has "
                       "its NVIDIA module);\n# with no saved entry GRUB boots its first entry, the newest kernel.\n"
                       "GRUB_DEFAULT=saved\n")
CACHE_HOOK = "50-gpunode-module-cache"
KEEP_HOOK = "zzz-gpunode-kernel-guard"
HOOK_DIRS = ("/etc/kernel/postinst.d", "/etc/kernel/header_postinst.d")


def hook_paths() -> dict[str, str]:
    """Every hook file the guard installs: path -> which hook (CACHE_HOOK or KEEP_HOOK)."""
    return {f"{folder}/{name}": name for folder in HOOK_DIRS for name in (CACHE_HOOK, KEEP_HOOK)}


def squote(value: str) -> str:
    """A value in single quotes, always (a config line reads the same whatever the value holds)."""
    return "'" + value.replace("'", "'\\''") + "'"


def config_text(module: str, version: str, flavour: str, arch: str, cache: str,
                read_by: str = "the hooks in /etc/kernel/*postinst.d/*gpunode*") -> str:
    """/etc/gpunode/kernel-guard.conf: sourced by the hooks; every value quoted."""
    rows = (("GUARD_MODULE", module, "DKMS module to guard; auto: the NVIDIA driver's (nvidia, nvidia-current, ...)"),
            ("GUARD_VERSION", version, "its version; empty: every version added to DKMS"),
            ("GUARD_FLAVOUR", flavour, "module cache key flavour; auto: open/proprietary for NVIDIA, else none"),
            ("GUARD_ARCH", arch, "module cache key architecture; empty: uname -m"),
            ("GUARD_CACHE", cache, "module cache on this node: a folder or an https URL; empty: none"))
    lines = [f"# Written by gpunode (kernel_guard step); read by {read_by}."]
    lines += [f"{name}={squote(value)}  # {doc}" for name, value, doc in rows]
    return "\n".join(lines) + "\n"


def _shell_pattern(regex: str) -> str:
    """The Python regex of NVIDIA driver module names as an extended regex for grep -E."""
    return regex.replace("(?:", "(").replace(r"\d", "[0-9]")


DEB_RUN_BY = ("the hooks in /etc/kernel/*postinst.d",
              "the kernel packages give the hooks the kernel release, then the image")


def _head(run_by: tuple[str, str]) -> str:
    """The script's first lines: who runs it (`run_by`: the hooks, and what they are given)."""
    return (f"#!/bin/sh\n# Written by gpunode (kernel_guard step): see {CONF_FILE}. Run by {run_by[0]} as\n"
            f"# {SCRIPT} cache|keep RELEASE [IMAGE] ({run_by[1]}).\n")


_COMMON = f"""mode=${{1:-}} k=${{2:-}}
[ -n "$k" ] && [ -r {CONF_FILE} ] && command -v dkms >/dev/null 2>&1 || exit 0
exec </dev/null >&2
GUARD_MODULE=auto GUARD_VERSION='' GUARD_FLAVOUR=auto GUARD_ARCH='' GUARD_CACHE=''
. {CONF_FILE}
log() {{ echo "gpunode kernel guard ($k): $*"; mkdir -p /var/log 2>/dev/null
  echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) $k: $*" >> {LOG_FILE} 2>/dev/null || true; }}
# the guarded modules: "module version" lines, each a version whose source is added to DKMS
guarded() {{
  for d in /var/lib/dkms/*/; do
    m=${{d%/}}; m=${{m##*/}}
    if [ "$GUARD_MODULE" = auto ]; then
      echo "$m" | grep -Eq {squote(_shell_pattern(NVIDIA_MODULE_PATTERN))} || continue
    elif [ "$m" != "$GUARD_MODULE" ]; then continue; fi
    for s in /var/lib/dkms/"$m"/*/source; do
      [ -e "$s" ] || continue
      v=${{s%/source}}; v=${{v##*/}}
      [ -z "$GUARD_VERSION" ] || [ "$v" = "$GUARD_VERSION" ] && echo "$m $v"
    done
  done
}}
installed() {{ dkms status -m "$1" -v "$2" -k "$3" 2>/dev/null | grep -q ': installed'; }}
"""

# the package's folder in the cache: <kernel>/<arch>/<module>-<version>[-<flavour>] (gpunode/modcache/key.py)
_CACHE_BODY = """cache_main() {
[ -n "$GUARD_CACHE" ] || return 0
a=${GUARD_ARCH:-$(uname -m)}
w=$(mktemp -d) || return 0
trap 'rm -rf "$w"' EXIT
get() {  # get URL-or-path-below-the-cache FILE
  case "$GUARD_CACHE" in
    https://*) command -v curl >/dev/null 2>&1 || { log "curl is missing: cannot read $GUARD_CACHE"; return 1; }
               curl -fsS --proto =https --max-time 60 -o "$2" "${GUARD_CACHE%/}/$1" ;;
    *) cp "${GUARD_CACHE%/}/$1" "$2" 2>/dev/null ;;
  esac
}
guarded > "$w/modules"
while read -r m v; do
  installed "$m" "$v" "$k" && continue
  f=$GUARD_FLAVOUR
  if [ "$f" = auto ]; then
    case "$m" in nvidia*-open*) f=open;; nvidia*) f=proprietary;; *) f=;; esac
  fi
  entry="$k/$a/$m-$v${f:+-$f}"
  if ! get "$entry/manifest.json" "$w/manifest.json"; then
    log "no module cache entry $entry in $GUARD_CACHE: dkms builds $m $v if it can"; continue
  fi
  file=$(sed -n 's/^ *"file": *"\\([A-Za-z0-9][A-Za-z0-9._+~-]*\\)",*$/\\1/p' "$w/manifest.json")
  sha=$(sed -n 's/^ *"sha256": *"\\([0-9a-f]\\{64\\}\\)",*$/\\1/p' "$w/manifest.json")
  if [ -z "$file" ] || [ -z "$sha" ] || ! get "$entry/$file" "$w/package"; then
    log "the module cache entry $entry is incomplete (manifest or package): dkms builds $m $v if it can"; continue
  fi
  if out=$(m=$m v=$v k=$k sha=$sha sh -c "$INSTALL" < "$w/package" 2>&1); then
    log "installed $m $v from the module cache ($entry, sha256 $sha): no compiler run"
  else
    log "the module cache's $m $v was refused or failed (exit $?): $(echo "$out" | tail -n 3 | tr '\\n' ' ')"
  fi
done < "$w/modules"
}
"""

_GUARD_BOOT = f"""# guard_boot: the boot default kept at a kernel with the module while the newest kernel ($k) lacks it;
# released (GRUB's first entry, the newest kernel, boots again) once it has it
update_grub() {{  # as zz-update-grub: not in a container, only where grub.cfg exists
  if systemd-detect-virt --quiet --container 2>/dev/null; then
    log "in a container: update-grub not run (as zz-update-grub does not)"
  elif command -v update-grub >/dev/null 2>&1 && [ -e /boot/grub/grub.cfg ]; then
    update-grub || log "update-grub failed: grub.cfg may not read GRUB_DEFAULT's new value yet"
  fi
}}
guard_boot() {{
[ -e "/boot/vmlinuz-$k" ] || [ -e "/boot/vmlinux-$k" ] || return 0  # headers only: no kernel to boot
newest=$(ls /boot/vmlinuz-* /boot/vmlinux-* 2>/dev/null | sed 's,^/boot/vmlinu[xz]-,,' | sort -V | tail -n 1)
state={STATE_FILE}
g=$(guarded)
[ -n "$g" ] || return 0
missing=$(echo "$g" | while read -r m v; do installed "$m" "$v" "$k" || echo "$m/$v"; done | tr '\\n' ' ')
missing=${{missing% }}
if [ -z "$missing" ]; then
  if [ -f "$state" ] && [ "$k" = "$newest" ]; then
    command -v grub-editenv >/dev/null 2>&1 && [ -e /boot/grub/grubenv ] &&
      grub-editenv /boot/grub/grubenv unset saved_entry
    if [ -e {GRUB_DROPIN} ]; then  # the GRUB_DEFAULT of /etc/default/grub holds again
      rm -f {GRUB_DROPIN}
      update_grub
    fi
    rm -f "$state"
    log "the module is installed for the newest kernel $k: the boot default is GRUB's again (GRUB_DEFAULT)"
  fi
  return 0
fi
[ "$k" = "$newest" ] || return 0  # not the kernel the boot loader's first entry boots
all_in() {{  # every guarded module installed for kernel $1
  ! echo "$g" | while read -r m v; do installed "$m" "$v" "$1" || echo no; done | grep -q no; }}
keep=
r=$(uname -r)
if [ "$r" != "$k" ] && [ -e "/boot/vmlinuz-$r" ] && all_in "$r"; then keep=$r; else
  for c in $(ls /boot/vmlinuz-* /boot/vmlinux-* 2>/dev/null | sed 's,^/boot/vmlinu[xz]-,,' | sort -rV); do
    [ "$c" != "$k" ] && all_in "$c" && {{ keep=$c; break; }}
  done
fi
write_state() {{  # boot_default=... then the rest
  mkdir -p "${{state%/*}}"; t=$(mktemp "$state.XXXXXX") && chmod 644 "$t" || return
  {{ echo "kernel=$k"; echo "missing=$missing"; echo "kept=$keep"; echo "entry=${{id:-}}"; echo "boot_default=$1"
     echo "time=$(date -u +%Y-%m-%dT%H:%M:%SZ)"; }} > "$t" && mv -f "$t" "$state"
}}
if [ -z "$keep" ]; then
  write_state "unchanged: no other installed kernel has the module"
  log "$missing not installed for $k, and no other kernel has it: the boot default is unchanged"; return 0
fi
id=
if ! command -v grub-set-default >/dev/null 2>&1 || [ ! -d /boot/grub ]; then
  write_state "unchanged: no GRUB (grub-set-default, /boot/grub) on this node"
  log "$missing not installed for $k; no GRUB here to keep $keep the boot default"; return 0
fi
cfg=/boot/grub/grub.cfg
ek=$(printf '%s' "$keep" | sed 's/\\./\\\\./g')
sub=$(sed -n "s/^submenu .*\\$menuentry_id_option '\\(gnulinux-advanced-[^']*\\)'.*/\\1/p" "$cfg" 2>/dev/null |
  head -n 1)
ent=$(sed -n "s/.*\\$menuentry_id_option '\\(gnulinux-$ek-advanced-[^']*\\)'.*/\\1/p" "$cfg" 2>/dev/null | head -n 1)
if [ -z "$ent" ]; then
  write_state "unchanged: $cfg has no menu entry for $keep"
  log "$missing not installed for $k; $cfg has no entry for $keep: the boot default is unchanged"; return 0
fi
id=${{sub:+$sub>}}$ent
if [ "$(cat {GRUB_DROPIN} 2>/dev/null)" != "$(printf '%s' {squote(GRUB_DROPIN_CONTENT.rstrip(chr(10)))})" ]; then
  mkdir -p /etc/default/grub.d && t=$(mktemp {GRUB_DROPIN}.XXXXXX) &&
    printf '%s\\n' {squote(GRUB_DROPIN_CONTENT.rstrip(chr(10)))} > "$t" && mv -f "$t" {GRUB_DROPIN}
  update_grub
fi
if grub-set-default "$id"; then
  write_state "kept: $(grub-editenv list 2>/dev/null | grep '^saved_entry=' | head -n 1)"
  log "$missing not installed for $k: the boot default stays at $keep until it is (saved_entry=$id)"
else
  write_state "unchanged: grub-set-default failed"
  log "$missing not installed for $k; grub-set-default failed: the boot default is unchanged"
fi
}}
"""


def guard_script(form: str = "deb", guard_boot: str = _GUARD_BOOT, run_by: tuple[str, str] = DEB_RUN_BY) -> str:
    """SCRIPT: `cache` installs the module for the new kernel from the module cache, then keeps the boot default
    while it is missing; `keep` keeps or releases the boot default (`guard_boot`: shell that defines it, GRUB's
    grub-set-default by default; the dnf side gives grubby's, gpunode/modcache/guard_el.py)."""
    install = hook_install_command(form)
    return (_head(run_by) + _COMMON + guard_boot + f"INSTALL={squote(install)}\n" + _CACHE_BODY +
            'case "$mode" in\n  cache) cache_main; guard_boot;;\n  keep) guard_boot;;\nesac\nexit 0\n')


def hook_text(name: str) -> str:
    """Hook `name` (CACHE_HOOK or KEEP_HOOK): runs SCRIPT with its mode and the kernel packages' arguments."""
    mode = "cache" if name == CACHE_HOOK else "keep"
    return (f"#!/bin/sh\n# Written by gpunode (kernel_guard step): the kernel guard, {mode} part ({CONF_FILE}).\n"
            f"[ -x {SCRIPT} ] || exit 0\nexec {SCRIPT} {mode} \"$@\"\n")


def parse_state(text: str) -> dict[str, str]:
    """STATE_FILE's key=value lines."""
    return dict(line.split("=", 1) for line in text.splitlines() if re.match(r"^[a-z_]+=", line))
