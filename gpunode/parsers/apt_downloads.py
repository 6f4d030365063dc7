"""What an apt install would download, with the SHA256 of each file from apt's own (signed) package index.

The input is two outputs joined by a line `--- index`: `apt-get --print-uris install ...` (one line per file to
fetch: `'URI' FILENAME SIZE HASH`; the hash field is apt's HashSum(), which on Debian 12's apt 2.6 is an MD5Sum or
empty, so it is not used), then `apt-cache show NAME=VERSION ...` for those files (stanzas with Filename, Size and
SHA256 from the lists `apt-get update` verified against the repository's signed Release). A file is matched to its
stanza by the pool path its URI ends with and by size; a file with no such stanza gets no sha256 (apt fetches it).

Source: Debian/apt apt-private/private-install.cc 486-491 (the print-uris line) at
6b128124271e94bdb0f4e7850d9286170d712b04.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

INDEX_MARK = "--- index"
_URI_LINE = re.compile(r"^'(?P<uri>[^']+)' (?P<file>\S+) (?P<size>\d+)(?: \S*)?\s*$")
_DEB_FILE = re.compile(r"^(?P<name>[^_/]+)_(?P<version>[^_/]+)_(?P<arch>[^_/]+)\.deb$")


@dataclass(frozen=True)
class Download:
    """One package file apt would fetch."""

    uri: str
    filename: str     # the name apt gives it in /var/cache/apt/archives (an epoch's ':' as %3a)
    size: int
    sha256: str       # from the package index; "" when no index entry matched (the file is left to apt)
    package: str      # name=version, as `apt-get download` takes it

    @property
    def shareable(self) -> bool:
        return bool(self.sha256)


def package_spec(filename: str) -> str:
    """`name=version` of an archive file name (`nfs-common_1%3a2.6.2-4_amd64.deb` -> `nfs-common=1:2.6.2-4`); ""
    for a name that is not NAME_VERSION_ARCH.deb."""
    match = _DEB_FILE.match(filename)
    return f"{match['name']}={unquote(match['version'])}" if match else ""


def print_uris_files(text: str) -> list[tuple[str, str, int]]:
    """(uri, filename, size) of each print-uris line; other lines (notices, warnings) are skipped."""
    found = []
    for line in text.splitlines():
        match = _URI_LINE.match(line.strip())
        if match:
            found.append((match["uri"], match["file"], int(match["size"])))
    return found


def index_stanzas(text: str) -> list[dict[str, str]]:
    """The stanzas of `apt-cache show` output (field -> value; continuation lines dropped)."""
    stanzas: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if current:
                stanzas.append(current)
            current = {}
            continue
        if line[:1] in (" ", "\t") or ":" not in line:
            continue
        field, _, value = line.partition(":")
        if field == "Package" and current:  # a stanza without its blank line before the next one
            stanzas.append(current)
            current = {}
        current[field.strip()] = value.strip()
    if current:
        stanzas.append(current)
    return stanzas


def parse_apt_downloads(text: str) -> list[Download]:
    """The files of `apt-get --print-uris install` (before INDEX_MARK) with their SHA256 from the stanzas after it."""
    uris, _, index = text.partition(INDEX_MARK)
    by_pool: dict[tuple[str, int], str] = {}
    for stanza in index_stanzas(index):
        filename, sha256 = stanza.get("Filename", ""), stanza.get("SHA256", "").lower()
        if filename and re.fullmatch(r"[0-9a-f]{64}", sha256) and stanza.get("Size", "").isdigit():
            by_pool[(filename, int(stanza["Size"]))] = sha256
    downloads = []
    for uri, filename, size in print_uris_files(uris):
        path = unquote(urlsplit(uri).path)
        sha256 = next((digest for (pool, pool_size), digest in by_pool.items()
                       if pool_size == size and path.endswith("/" + pool)), "")
        downloads.append(Download(uri, filename, size, sha256, package_spec(filename)))
    return downloads
