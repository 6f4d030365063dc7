"""One initramfs generation per package install instead of one per trigger run (issue 40).

Measured on a Debian 12 lab host (tests/data/phases/SOURCES.md): the kernel's install generated its image twice
(the kernel's postinst hook, then the initramfs-tools trigger) and the driver's install three times (the
initramfs-tools trigger, processed three times inside the one apt transaction; why dpkg runs it early was not traced
further: what matters is that batching the installs into one transaction does not make them one).

What does: initramfs-tools' own switches. During the install:
- `update_initramfs=no` in /etc/initramfs-tools/update-initramfs.conf (a line gpunode appends, with its mark, and
  removes after): update-initramfs sources that file and its `update()` (the -u the trigger runs) then says
  "update-initramfs: Not updating initramfs." and does nothing; `create()` (-c) does not read it (initramfs-tools
  0.142+deb12u3 /usr/sbin/update-initramfs, lines 4-12 and 246-251, read on a lab host).
- `INITRD=No` in the environment: the kernel's hook /etc/kernel/postinst.d/initramfs-tools exits without
  `update-initramfs -c` (same package, the hook's "exit if kernel does not need an initramfs").
Held, not ended, after a good install: the installs of one run (the kernel's, then the driver's) share one pause,
and one generation ends it (FLUSH), run before the first command of the run that is not such an install, before a
reboot, and at the end of the host's run, whatever happened (steps/initramfs_hold.py). An install that fails ends
the pause at once. The generation: `update-initramfs -c -k K` for each kernel left without an image (what the
kernel's hook would have made), else `update-initramfs -u` (what the trigger would have run: the newest kernel's
image, or all of them with the user's `update_initramfs=all`). The packages' files are all in place then, so that
one image has all they asked for (the nouveau blacklist, modprobe options, firmware). A kernel given its image then
also gets its GRUB entry remade: its own postinst ran zz-update-grub while it had no image, and GRUB's 10_linux
writes an `initrd` line only for an image that exists (grub-common 2.06-13+deb12u2, /etc/grub.d/10_linux lines
320-343). The hook is run as the kernel's postinst runs it, `zz-update-grub VERSION IMAGE`; outside dpkg (no
DEB_MAINT_PARAMS) it runs update-grub where /boot/grub/grub.cfg exists and does nothing in a container
(grub2-common 2.06-13+deb12u2, /etc/kernel/postinst.d/zz-update-grub lines 4-9 and 11-22; both read from the
packages on 2026-11-29).

A run cut short with the pause held (a power cut, a lost controller): the line stays, with its mark; the next run's
probe finds it and ends it first (initramfs_left.py, in the kernel and driver steps), with the same FLUSH. A host
without initramfs-tools (dracut) runs the install as it is."""

from __future__ import annotations

from gpunode.connection import q

CONF = "/etc/initramfs-tools/update-initramfs.conf"
MARK = "# gpunode: initramfs updates paused during a package install; one update after it"
PAUSE_LINE = f"update_initramfs=no {MARK}"
PAUSE_PROBE = f"grep -F {q(MARK)} {CONF} 2>/dev/null"
# the kernels of /lib/modules with a kernel image in /boot and no initramfs image
_IMAGELESS = ("for m in /lib/modules/*; do k=${m##*/}; [ -e \"/boot/vmlinuz-$k\" ] && "
              "[ ! -e \"/boot/initrd.img-$k\" ] && echo \"$k\"; done")
RESUME = f"sed -i {q('/' + MARK.replace('/', chr(92) + '/') + '/d')} {CONF}"
HOOK = "/etc/kernel/postinst.d/zz-update-grub"
HELD = f"grep -qF {q(MARK)} {CONF} 2>/dev/null"  # the pause's line is there (this run's, or one left behind)
# End a held pause: its line removed, an image for each kernel left without one (and its GRUB entry), else (a pause
# was held) the newest image updated. Where nothing is held and every kernel has its image, it does nothing.
FLUSH = ("( h=; if " + HELD + "; then " + RESUME + " || exit; h=1; fi; rc=0; "
         "made=; for k in $(" + _IMAGELESS + "); do update-initramfs -c -k \"$k\" || rc=$?; made=\"$made $k\"; done; "
         "if [ -z \"$made\" ] && [ -n \"$h\" ]; then update-initramfs -u || rc=$?; fi; set -- $made; "
         "if [ -n \"$made\" ] && [ -x " + HOOK + " ]; then " + HOOK + " \"$1\" \"/boot/vmlinuz-$1\" || rc=$?; fi; "
         "exit $rc )")


def paused(command: str) -> str:
    """`command` (a package install) with initramfs generations held back, in a subshell of its own: INITRD=No
    (the kernel hook's -c held back; not where dracut is installed: its kernel hook is not initramfs-tools'), and
    the pause where initramfs-tools is installed before the install (on a bare host its own first setup runs the
    trigger: that one generation stays). A pause this run already holds is kept. The install failing, or no pause
    held (a kernel left without an image gets it now), ends it here (FLUSH); else it stays held for the run."""
    has = "command -v update-initramfs >/dev/null"
    return ("( command -v dracut >/dev/null || export INITRD=No; if [ -f " + CONF + " ] && " + has + "; then "
            + HELD + " || printf '%s\\n' " + q(PAUSE_LINE) + " >> " + CONF + "; fi; "
            "( " + command + " ); rc=$?; if [ $rc != 0 ]; then " + FLUSH + "; elif ! " + HELD + "; then "
            + FLUSH + " || rc=$?; fi; exit $rc )")
