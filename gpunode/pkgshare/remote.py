"""Host-side commands of the package share (apt hosts).

Apt installs a file it finds in /var/cache/apt/archives when its size is the index's, without hashing it
(Debian/apt apt-pkg/acquire-item.cc 3578-3591, pkgAcqArchive::QueueNext, at 6b128124271e94bdb0f4e7850d9286170d712b04),
so every file is checked here against the sha256 of the host's own package index before it is put there."""

from __future__ import annotations

from collections.abc import Sequence

from gpunode.connection import join, q
from gpunode.parsers.apt_downloads import INDEX_MARK, Download

ARCHIVES = "/var/cache/apt/archives"
BEGIN = "--- gpunode packages (base64 tar) ---"
DAMAGED = 5  # exit status: a file's sha256 is not the index's


def plan_command(update: str, print_uris: str) -> str:
    """Refresh the lists when `update` is given, then print what the install would fetch (apt-get --print-uris) and
    the index stanzas of those files (apt-cache show NAME=VERSION: Filename, Size, SHA256)."""
    refresh = f"{{ {update}; }} >&2 && " if update else ""
    return (f"{refresh}u=$({print_uris}) && printf '%s\\n' \"$u\" && echo {q(INDEX_MARK)} && "
            "s=$(printf '%s\\n' \"$u\" | sed -n \"s/^'[^']*' \\([^ ]*\\) .*/\\1/p\" | "
            "sed -E 's/^([^_]+)_([^_]+)_[^_]+\\.deb$/\\1=\\2/; s/%3a/:/g') && "
            "{ [ -z \"$s\" ] || apt-cache show $s 2>/dev/null || true; }")


def _checks(files: Sequence[Download]) -> str:
    """A sha256sum -c list of `files` (their names relative to the current folder)."""
    return "".join(f"{f.sha256}  {f.filename}\n" for f in files)


def download_command(files: Sequence[Download]) -> str:
    """Fetch `files` with apt (apt-get download checks them against the index), check their sha256 and place them in
    the archive cache, where the install finds them."""
    return _into_archives(files, "cd \"$d\"; chown _apt \"$d\" 2>/dev/null || true; "
                                 "apt-get -qq -o DPkg::Lock::Timeout=600 download -- "
                                 f"{join(f.package for f in files)} >&2")


def read_command(files: Sequence[Download]) -> str:
    """Print `files` from the archive cache as a base64 tar after BEGIN."""
    return f"cd {ARCHIVES} && echo {q(BEGIN)} && tar -c -- {join(f.filename for f in files)} | base64 -w0; echo"


def seed_command(files: Sequence[Download]) -> str:
    """Take a tar of `files` on stdin; each one whose sha256 is the index's goes into the archive cache (exit 5 and
    nothing placed when one is not)."""
    return _into_archives(files, "tar -x --no-same-owner -C \"$d\" -f -; cd \"$d\"")


def _into_archives(files: Sequence[Download], fill: str) -> str:
    """`fill` puts `files` into a fresh folder $d under the archive cache and leaves the shell there; then every file
    is checked against its index sha256 (exit 5 and nothing placed when one differs) and moved into the cache."""
    names = join(f.filename for f in files)
    return (f"set -e; mkdir -p {ARCHIVES}/partial; d=$(mktemp -d {ARCHIVES}/partial/gpunode.XXXXXX); "
            f"trap 'rm -rf \"$d\"' EXIT; {fill}; "
            f"printf %s {q(_checks(files))} | sha256sum -c --quiet - >&2 || exit {DAMAGED}; "
            f"chmod 644 -- {names}; mv -f -- {names} {ARCHIVES}/")
