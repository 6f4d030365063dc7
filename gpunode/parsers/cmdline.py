"""`/proc/cmdline`: modules the kernel command line blacklists."""

from __future__ import annotations

BLACKLIST_KEYS = ("modprobe.blacklist", "rd.driver.blacklist")  # kernel-parameters.txt, dracut.cmdline(7)


def blacklisted_modules(cmdline: str) -> frozenset[str]:
    """Modules named by `modprobe.blacklist=a,b` or `rd.driver.blacklist=a,b` on the kernel command line."""
    names: set[str] = set()
    for token in cmdline.split():
        key, _, value = token.partition("=")
        if key in BLACKLIST_KEYS:
            names.update(value.split(","))
    return frozenset(names)
