"""Shell for DKMS that the module cache and the driver step share: an install checked by what dkms itself says
of the files in the kernel tree, not by its exit status (a copy cut short by a full disk exits 0 on older dkms and
`dkms status` still begins "installed")."""

from __future__ import annotations

from gpunode.parsers.dkms import DIVERGED_WORDS

DIVERGED_EXIT = 6  # the install ran, but the module files in the kernel tree are not the ones DKMS built

_DIVERGED_CASE = "|".join(f'*"{words}"*' for words in DIVERGED_WORDS)


def free_space(kernel: str) -> str:
    """Shell: say on stderr how much space is left where dkms puts the kernel's modules (updates/dkms on Debian and
    Ubuntu, extra on EL, else the kernel's folder; each filesystem once). `kernel` is shell (quoted or a variable)."""
    return (f'echo "free space where the modules go: $(cd /lib/modules/{kernel} 2>/dev/null && df -h --output='
            "avail,target updates/dkms updates extra . 2>/dev/null | tail -n +2 | sort -u | tr -s ' \\n' ' ')\" >&2")


def installed_check(status_args: str, kernel: str) -> str:
    """Shell: exit 0 when `dkms status STATUS_ARGS` says installed with the files DKMS built; 1 when it says not
    installed; DIVERGED_EXIT when the files differ, naming the free space where they go. `kernel` is shell (quoted
    or a variable)."""
    return (f's=$(dkms status {status_args} 2>&1); '
            'case "$s" in *": installed"*) ;; *) echo "dkms status: ${s:-nothing}" >&2; exit 1;; esac; '
            f'case "$s" in {_DIVERGED_CASE}) echo "dkms status: $s" >&2; '
            'echo "the module files in the kernel tree are not the ones DKMS built (a copy cut short: is the disk '
            f'full?)" >&2; {free_space(kernel)}; exit {DIVERGED_EXIT};; esac')


def uninstall_if_diverged(module: str, version: str, kernel: str) -> str:
    """Shell: `dkms uninstall` of the module when dkms says its installed files differ from the built ones, so the
    `dkms install` after it copies them again (dkms refuses to install over an installed module: dkms.in
    do_install, "already installed", 793fdab5 line 1660). Arguments are shell (quoted or variables)."""
    args = f"-m {module} -v {version} -k {kernel}"
    return (f'case "$(dkms status {args} 2>/dev/null)" in {_DIVERGED_CASE}) dkms uninstall {args} >/dev/null;; '
            'esac')
