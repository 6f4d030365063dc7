"""Nouveau out of the NVIDIA driver's way: the blacklist, and the initramfs images made before it rebuilt."""

from __future__ import annotations

from gpunode.steps.base import Action, StepContext
from gpunode.steps.remote_file import parse_file_probe, write_action

NOUVEAU_CONF = "/etc/modprobe.d/blacklist-nouveau.conf"
NOUVEAU_CONTENT = "# Written by gpunode: the NVIDIA driver cannot load while nouveau holds the GPU.\n" \
                  "blacklist nouveau\noptions nouveau modeset=0\n"
# The kernels whose initramfs image is not newer than the nouveau blacklist (it was made before the blacklist, so it
# lacks it) among those the NVIDIA module is installed for (an nvidia*.ko* under /lib/modules/K: Debian's
# nvidia-current.ko, NVIDIA's nvidia.ko; on a kernel without it nouveau is the only driver the GPU has, so an image
# without the blacklist costs nothing there, and remaking it would be one more generation per old kernel):
# initramfs-tools: /boot/initrd.img-K; dracut: /boot/initramfs-K.img, which also leaves out the EL rescue and kdump
# images. The probe lists them; the rebuild, run after the packages, rebuilds only those still stale then: the
# driver's own install regenerates the newest kernel's image on Debian (initramfs-tools' trigger, held to one
# generation: steps/initramfs_pause.py), so the blacklist costs no generation of its own there.
STALE_INITRAMFS = (f"c={NOUVEAU_CONF}; if [ -e \"$c\" ]; then for m in /lib/modules/*; do k=${{m##*/}}; "
                   "[ -n \"$(find \"$m\" -name 'nvidia*.ko*' -print -quit 2>/dev/null)\" ] || continue; "
                   "for f in \"/boot/initrd.img-$k\" \"/boot/initramfs-$k.img\"; do "
                   "if [ -e \"$f\" ] && [ ! \"$f\" -nt \"$c\" ]; then echo \"$k\"; fi; done; done; fi")
# update-initramfs {-c|-d|-u} [-k version] (update-initramfs(8) of initramfs-tools 0.142, its usage() read on a lab
# host); dracut [OPTION...] [<image> [<kernel version>]], -f overwrites (dracut(8): dracutdevs/dracut
# man/dracut.8.asc, SYNOPSIS and OPTIONS, at edc88f66aa53be1d6e04de95b17d5fe94a6d40e5).
REBUILD_STALE_INITRAMFS = (f"for k in $({STALE_INITRAMFS}); do if command -v update-initramfs >/dev/null; then "
                           "update-initramfs -u -k \"$k\" || exit; elif command -v dracut >/dev/null; then "
                           "dracut -f \"/boot/initramfs-$k.img\" \"$k\" || exit; fi; done")


def nouveau_actions(ctx: StepContext) -> list[Action]:
    """Nouveau blacklisted and the initramfs rebuilt; a reboot when nouveau is loaded now."""
    nouveau = parse_file_probe(ctx.probe["nouveau"])
    if nouveau.content == NOUVEAU_CONTENT:
        return []
    write = write_action(NOUVEAU_CONF, nouveau, NOUVEAU_CONTENT, reason="nouveau must not claim the GPU")
    write.summary = f"blacklist nouveau ({NOUVEAU_CONF})"
    if ctx.facts.nvidia.nouveau_loaded:
        ctx.require_reboot("nouveau is loaded and now blacklisted")
    return [write]


def initramfs_actions(ctx: StepContext, actions: list[Action]) -> list[Action]:
    """The initramfs images made before the nouveau blacklist rebuilt, after the packages (whose own install
    usually regenerates the newest kernel's image with the blacklist in it): when the blacklist is written now,
    or the probe found images older than it (a run stopped between the two)."""
    stale = ctx.probe["initramfs"].split()
    writing = any(a.summary.startswith(f"blacklist nouveau ({NOUVEAU_CONF})") for a in actions)
    if not writing and not stale:
        return []
    which = f" (kernels {', '.join(sorted(set(stale)))})" if stale else ""
    return [Action(f"rebuild the initramfs images older than the nouveau blacklist{which}",
                   "the initramfs loads modules before the root file system: nouveau must be blacklisted in it "
                   "too; an image the package install regenerated already has it", REBUILD_STALE_INITRAMFS,
                   timeout=900,
                   fix="see the update-initramfs / dracut output above; /boot must have room for the new images")]
