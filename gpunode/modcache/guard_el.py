"""The kernel guard on dnf hosts (RHEL/Rocky/Alma 8 and 9, Amazon Linux 2023, Alibaba Cloud Linux 3, TencentOS):
two kernel-install plugins that run the guard's one script (gpunode/modcache/guard_hooks.py), with a `guard_boot`
that keeps the boot default with grubby instead of GRUB's grub-set-default.

How a kernel install reaches them (each fact with the file it was read from):

- kernel-install runs every executable `*.install` of /etc/kernel/install.d and /usr/lib/kernel/install.d, the
  basenames sorted together (`sort -Vu`, LC_COLLATE=C), a name in /etc/kernel/install.d replacing the same name in
  /usr/lib/kernel/install.d, each as `PLUGIN add KERNEL-VERSION ENTRY-DIR KERNEL-IMAGE [INITRD...]`; exit 77 stops
  the rest, and so does any other failure in systemd 252 (src/kernel-install/kernel-install.in as Debian 12's
  systemd 252.39-1~deb12u2 installs it, /usr/bin/kernel-install lines 37-54 (dropindirs_sort), 56 (LC_COLLATE=C),
  314-316 (the two folders), 354-356 (the add call, 77, `exit $err`); the earlier text at
  systemd/systemd@00e684cc11721817bef9135b2a1300289027d019 src/kernel-install/kernel-install.in sums failures and
  runs on). RHEL 9 ships systemd 252. Hence the cache plugin keeps the default already, as the Debian cache hook
  does: a failing plugin between it and the keep plugin would stop the keep plugin.
- dkms's plugin is `40-dkms.install` in /usr/lib/kernel/install.d (dkms-project/dkms Makefile line 75,
  install-redhat, at c967462f47e2f0ac2e26eaf17730621aeca7239c, v3.2.0; v3.0.12 (c22fad07) and v3.0.13 (4d466bf7)
  put it in /etc/kernel/install.d, lines 64 and 76; before v3.0.12 it was /etc/kernel/install.d/dkms, which
  kernel-install never ran: no `.install`), and it runs `dkms kernel_postinst --kernelver "$2"` on `add`. From
  v3.2.2 it exits 0 whatever the build did (redhat_kernel_install.d.in lines 6-15 at
  dkms-project/dkms@04154266549a7b3723f8e7a18515b59c34e921b1, v3.4.3; commit 155b40a); v3.2.0 and v3.2.1 exit with
  dkms's status (lines 6-17 at c967462f), e.g. 21 when the new kernel has no headers (dkms.in `die 21`), and
  kernel-install 252 then runs no later plugin: the keep plugin does not run, the cache plugin has kept the default
  already (tests/test_kernel_guard_el.py runs both dkms versions).
- grubby's plugin is `20-grubby.install` (yuwata/systemd-fedora@12da227455a6872d695cdcac1093b6b5fe9f9008
  20-grubby.install, the Fedora packaging's copy: its `add` case lines 15-40 runs new-kernel-pkg; it exits 77 when
  /boot/loader/entries is missing, lines 48-51). Whether it makes the new kernel the default is UPDATEDEFAULT in
  /etc/sysconfig/kernel (rhboot/grubby@c01b0d5bb182bde35b464d14996acf354a3ada2e new-kernel-pkg lines 39 and 761).
  The BLS-era plugin of RHEL 8/9's grubby package was not in reach to read, so the guard reads the outcome rather
  than assuming it: `grubby --default-kernel` once 20-grubby.install ran (grubby.8 lines 141-143 of the same
  commit: --set-default takes the kernel's path).

- `CACHE_PLUGIN` (`39-gpunode-module-cache.install`: sorts before `40-dkms.install`): the module from the module
  cache (the shared `cache_main`), then `guard_boot`.
- `KEEP_PLUGIN` (`99-zz-gpunode-kernel-guard.install`: after `20-grubby.install`, `40-dkms.install` and every other
  numbered plugin): `guard_boot` again, which gives the default back to the new kernel when dkms built its module.

`guard_boot` (grubby): when `grubby --default-kernel` is the new kernel's /boot/vmlinuz and a guarded module is not
installed for it, the default goes back to a kernel that has it (the running one when it does, else the newest
other, rescue images never) with `grubby --set-default`, and the why goes to the Debian side's `STATE_FILE` and
`LOG_FILE`, so verify-gpu's kernel-guard-* checks read it as they read Debian's (`loader=grubby` in it: the
remedy names grubby). When the module is there later and the record
names this kernel, the default is the new kernel again if UPDATEDEFAULT=yes (what grubby's plugin would have done).
Both plugins always exit 0 (never 77: that would skip the plugins after them)."""

from __future__ import annotations

from gpunode.modcache.guard_hooks import CONF_FILE, LOG_FILE, SCRIPT, STATE_FILE, guard_script

INSTALL_DIR = "/etc/kernel/install.d"
CACHE_PLUGIN = "39-gpunode-module-cache.install"
KEEP_PLUGIN = "99-zz-gpunode-kernel-guard.install"
SYSCONFIG_KERNEL = "/etc/sysconfig/kernel"
EL_RUN_BY = (f"the kernel-install plugins {INSTALL_DIR}/*gpunode*.install",
             "the plugins give it the kernel release, then the image")
EL_READ_BY = f"the kernel-install plugins {INSTALL_DIR}/*gpunode*.install"

_GUARD_BOOT_GRUBBY = f"""# guard_boot (grubby): the boot default kept at a kernel with the module while the new kernel
# ($k), which grubby's plugin made the default, lacks it; $k the default again once it has it (UPDATEDEFAULT=yes)
guard_boot() {{
[ -e "/boot/vmlinuz-$k" ] || return 0  # no kernel image in /boot: nothing boots it
state={STATE_FILE}
g=$(guarded)
[ -n "$g" ] || return 0
missing=$(echo "$g" | while read -r m v; do installed "$m" "$v" "$k" || echo "$m/$v"; done | tr '\\n' ' ')
missing=${{missing% }}
default=
command -v grubby >/dev/null 2>&1 && default=$(grubby --default-kernel 2>/dev/null)
if [ -z "$missing" ]; then
  if [ -f "$state" ] && grep -qx "kernel=$k" "$state"; then
    u=$( [ -r {SYSCONFIG_KERNEL} ] && . {SYSCONFIG_KERNEL} >/dev/null 2>&1; echo "${{UPDATEDEFAULT:-}}")
    if [ "$u" = yes ] && grep -q '^boot_default=kept' "$state" && grubby --set-default "/boot/vmlinuz-$k" >/dev/null
    then log "the module is installed for $k: it is the boot default again (UPDATEDEFAULT=yes)"
    else log "the module is installed for $k; the boot default stays ${{default:-unknown}}"; fi
    rm -f "$state"
  fi
  return 0
fi
write_state() {{  # boot_default=... then the rest
  mkdir -p "${{state%/*}}"; t=$(mktemp "$state.XXXXXX") && chmod 644 "$t" || return
  {{ echo "kernel=$k"; echo "missing=$missing"; echo "kept=$keep"; echo "entry=${{id:-}}"; echo "boot_default=$1"
     echo "loader=grubby"; echo "time=$(date -u +%Y-%m-%dT%H:%M:%SZ)"; }} > "$t" && mv -f "$t" "$state"
}}
keep='' id=''
if [ -z "$default" ]; then
  write_state "unchanged: no grubby (grubby --default-kernel) on this node"
  log "$missing not installed for $k; no grubby here to say or keep the boot default"; return 0
fi
[ "$default" = "/boot/vmlinuz-$k" ] || return 0  # not the kernel that boots next
all_in() {{  # every guarded module installed for kernel $1
  ! echo "$g" | while read -r m v; do installed "$m" "$v" "$1" || echo no; done | grep -q no; }}
r=$(uname -r)
if [ "$r" != "$k" ] && [ -e "/boot/vmlinuz-$r" ] && all_in "$r"; then keep=$r; else
  for c in $(ls /boot/vmlinuz-* 2>/dev/null | sed 's,^/boot/vmlinuz-,,' | grep -v rescue | sort -rV); do
    [ "$c" != "$k" ] && all_in "$c" && {{ keep=$c; break; }}
  done
fi
if [ -z "$keep" ]; then
  write_state "unchanged: no other installed kernel has the module"
  log "$missing not installed for $k, and no other kernel has it: the boot default is unchanged"; return 0
fi
id=/boot/vmlinuz-$keep
if grubby --set-default "$id" >/dev/null && [ "$(grubby --default-kernel 2>/dev/null)" = "$id" ]; then
  write_state "kept: $id"
  log "$missing not installed for $k: the boot default stays at $keep until it is (grubby --set-default $id)"
else
  write_state "unchanged: grubby --set-default $id failed"
  log "$missing not installed for $k; grubby --set-default $id failed: the boot default is unchanged"
fi
}}
"""


def plugin_paths() -> dict[str, str]:
    """Every kernel-install plugin the guard installs: path -> which (CACHE_PLUGIN or KEEP_PLUGIN)."""
    return {f"{INSTALL_DIR}/{name}": name for name in (CACHE_PLUGIN, KEEP_PLUGIN)}


def plugin_text(name: str) -> str:
    """Plugin `name`: on `add`, runs SCRIPT with its mode, the kernel release and the image; nothing on `remove`."""
    mode = "cache" if name == CACHE_PLUGIN else "keep"
    return (f"#!/bin/sh\n# Written by gpunode (kernel_guard step): the kernel guard, {mode} part ({CONF_FILE}; "
            f"log: {LOG_FILE}).\n# kernel-install runs it as: {name} add|remove KERNEL-VERSION ENTRY-DIR "
            "[KERNEL-IMAGE [INITRD...]]\n"
            f"[ \"${{1:-}}\" = add ] && [ -x {SCRIPT} ] || exit 0\nexec {SCRIPT} {mode} \"$2\" \"${{4:-}}\"\n")


def el_guard_script(form: str = "tar") -> str:
    """SCRIPT on a dnf host: the shared script with grubby's `guard_boot`."""
    return guard_script(form, _GUARD_BOOT_GRUBBY, EL_RUN_BY)
