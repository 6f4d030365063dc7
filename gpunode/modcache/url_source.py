"""A module cache read over https: a copy of a cache folder served by a web server or a bucket's https endpoint
(S3, OSS, COS: public-read or behind a CDN), fetched entry by entry into a local mirror folder.

The layout is the folder's (`<url>/<kernel>/<arch>/<module>-<version>[-flavour]/manifest.json` and the package beside
it), so `aws s3 sync ~/.cache/gpunode/modules s3://bucket/modules` publishes a controller's cache as it is. Read-only:
a build made because the URL has no entry is kept in the mirror, and the run's notes say where to copy it. Only https
with a verified certificate: a module that a man in the middle could swap (manifest and package alike) would load
into the kernel as root."""

from __future__ import annotations

import hashlib
import json
import re
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import quote, urlsplit

from gpunode.modcache.key import CacheKey
from gpunode.modcache.store import MANIFEST, Entry, Store

SOURCE_FILE = ".source-url"  # in a mirror folder: the URL it mirrors (Store(root) finds its source again)
TIMEOUT = 30.0
MAX_MANIFEST = 1 << 16
MAX_PACKAGE = 4 << 30
_FILE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+~-]*$")
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_HOST = re.compile(rf"^(?:{_LABEL}\.)*{_LABEL}$|^[0-9a-fA-F:.]+$")  # a DNS name, an IPv4 or an IPv6 address


class SourceError(Exception):
    """The URL could not be read (network, TLS, HTTP status other than 403/404) or served a bad entry."""


def url_problem(value: str) -> str:
    """Why `value` (a cache setting with `://`) cannot be a module cache URL; "" when it can."""
    parts = urlsplit(value.strip())
    if parts.scheme.lower() != "https":
        return (f"the module cache URL {value} is not https: only an https URL (a verified certificate) may deliver "
                "kernel modules; s3://, oss:// and cos:// buckets are read through their https endpoint")
    if parts.username is not None or parts.password is not None:
        shown = parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()
        return (f"the module cache URL {shown} carries a user name or password, which would end up in logs and the "
                "mirror folder: give the nodes read access another way (a public-read prefix, a bucket policy for "
                "your VPC endpoint, a CDN) and no credentials in the URL")
    try:
        parts.port  # noqa: B018 (raises on a port that is not a number)
    except ValueError:
        return f"the module cache URL {value} has a port that is not a number"
    if not _HOST.match(parts.hostname or "") or parts.query or parts.fragment or re.search(r"\s", value.strip()):
        return f"the module cache URL {value} needs a host name, no spaces, and no query or fragment"
    return ""


def normalize_url(url: str) -> str:
    """One spelling per URL (scheme and host in lower case, no doubled or trailing slashes), so that two runs that
    write it differently share one mirror and one build lock."""
    parts = urlsplit(url.strip())
    path = re.sub(r"/{2,}", "/", parts.path).rstrip("/")
    return parts._replace(scheme=parts.scheme.lower(), netloc=parts.netloc.lower(), path=path).geturl()


def mirror_folder(url: str, home: Path) -> Path:
    """The local folder that mirrors `url`: <home>/modules-from/<host>-<hash of the URL>."""
    url = normalize_url(url)
    host = re.sub(r"[^A-Za-z0-9.-]", "_", urlsplit(url).hostname or "url")
    return home / "modules-from" / f"{host}-{hashlib.sha256(url.encode()).hexdigest()[:12]}"


def mirror_store(url: str, home: Path) -> Store:
    """The store of a URL cache: its mirror folder, which records the URL (so that `Store(folder)` reads it too)."""
    url = normalize_url(url)
    folder = mirror_folder(url, home)
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / SOURCE_FILE
    if not marker.exists() or marker.read_text().strip() != url:
        marker.write_text(url + "\n")
    return Store(folder)


def source_of(root: Path) -> str:
    """The URL a mirror folder mirrors ("" for a plain cache folder)."""
    try:
        return (root / SOURCE_FILE).read_text().strip()
    except OSError:
        return ""


def fetch(url: str, key: CacheKey, store: Store) -> Entry | None:
    """The group's entry read from `url` into `store` (the mirror), checked against its manifest; None when the URL
    has none (404, or 403 as S3 answers for a missing object without list permission). Raises SourceError."""
    base = f"{url.rstrip('/')}/{quote(key.path)}"
    raw = _get(f"{base}/{MANIFEST}", MAX_MANIFEST)
    if raw is None:
        return None
    try:
        manifest = json.loads(raw)
        name, sha256, vermagic = str(manifest["file"]), str(manifest["sha256"]), str(manifest["vermagic"])
        same_key = CacheKey.from_dict(manifest["key"]) == key
    except (ValueError, KeyError, TypeError) as exc:
        raise SourceError(f"{base}/{MANIFEST} is not a module cache manifest ({exc})") from None
    if not same_key or not _FILE.match(name):
        raise SourceError(f"{base}/{MANIFEST} is for another group or names an unsafe file ({name!r})")
    data = _get(f"{base}/{quote(name)}", MAX_PACKAGE)
    if data is None:
        raise SourceError(f"{base}/{name} is missing though its manifest is there")
    if hashlib.sha256(data).hexdigest() != sha256:
        raise SourceError(f"{base}/{name} is not the package its manifest names (sha256 differs)")
    built_on = str(manifest.get("built_on", ""))
    return store.put(key, name, data, vermagic, f"{built_on} (via {url})" if built_on else f"via {url}")


class _HttpsOnlyRedirects(urllib.request.HTTPRedirectHandler):
    """Redirects are followed only to https (urllib would follow one to http, undoing the https-only rule)."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: ANN001, ANN201 (urllib's signature)
        if urlsplit(newurl).scheme.lower() != "https":
            raise urllib.error.HTTPError(newurl, code, f"redirect to {newurl} refused: not https", headers, fp)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _get(url: str, limit: int) -> bytes | None:
    """The body of `url` (None on 404/403), at most `limit` bytes. 403 counts as absent: S3 answers a GET of a missing
    object with 403 when the reader lacks s3:ListBucket (Amazon S3 API reference, GetObject, Permissions:
    https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html)."""
    request = urllib.request.Request(url, headers={"User-Agent": "gpunode"})
    try:
        with urllib.request.build_opener(_HttpsOnlyRedirects).open(request, timeout=TIMEOUT) as response:
            data = response.read(limit + 1)
    except urllib.error.HTTPError as exc:
        if exc.code in (403, 404):
            return None
        raise SourceError(f"{url}: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise SourceError(f"{url}: {getattr(exc, 'reason', exc)}") from None
    if len(data) > limit:
        raise SourceError(f"{url} is larger than {limit} bytes")
    return data
