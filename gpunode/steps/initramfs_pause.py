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
After it, once: `update-initramfs -c -k K` for each kernel the install left without an image (what the hook would
have made), else `update-initramfs -u` (what the trigger would have run: the newest kernel's image, or all of them
with the user's `update_initramfs=all`). The packages' files are all in place then, so that one image has all they
asked for (the nouveau blacklist, modprobe options, firmware).

A run cut short between the two (a power cut): the line stays, with its mark; the next run's probe finds it and
removes it first (initramfs_left.py, in the kernel and driver steps) and regenerates the image. A host without
initramfs-tools (dracut) runs the install as it is."""

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


def paused(command: str) -> str:
    """`command` (a package install) with initramfs generations held back, and the one generation after it. A
    subshell of its own: its EXIT trap leaves the caller's (the DKMS autoinstall pause) alone. INITRD=No only where
    dracut is not installed (its kernel hook is not initramfs-tools'); the pause only where initramfs-tools is
    installed before the install (on a bare host its own first setup runs the trigger: that one generation stays)."""
    has = "command -v update-initramfs >/dev/null"
    return ("( p=; s=; command -v dracut >/dev/null || { s=1; export INITRD=No; }; "
            "before=$( { " + _IMAGELESS + "; } | tr '\\n' ' '); "
            "if [ -f " + CONF + " ] && " + has + " && ! grep -qF " + q(MARK) + " " + CONF + "; then "
            "printf '%s\\n' " + q(PAUSE_LINE) + " >> " + CONF + " && p=1; fi; "
            "resume() { [ -z \"$p\" ] || " + RESUME + "; }; trap resume EXIT; ( " + command + " ); rc=$?; made=; "
            "if [ -n \"$s\" ] && " + has + "; then for k in $(" + _IMAGELESS + "); do case \" $before \" in "
            "*\" $k \"*) ;; *) update-initramfs -c -k \"$k\" || rc=$?; made=1;; esac; done; fi; "
            "if [ -n \"$p\" ]; then resume; p=; [ -n \"$made\" ] || update-initramfs -u || rc=$?; fi; exit $rc )")
