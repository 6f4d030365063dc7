"""The module cache read over https (gpunode/modcache/url_source.py) from a real TLS server on 127.0.0.1 serving a
cache folder as a bucket would: entries fetched into the controller's mirror and checked, absent ones (404, and 403 as
S3 answers without list permission), damaged ones refused, an untrusted certificate refused, URLs that are not https
refused before any host."""

from __future__ import annotations

import json

import pytest

from gpunode.modcache.key import CacheKey
from gpunode.modcache.store import Store
from gpunode.modcache.url_source import SourceError, fetch, mirror_store, source_of, url_problem
from gpunode.steps.cache_setting import cache_store, check_cache_setting
from tests.conftest import run_cli
from tests.https_folder import https_folder

KERNEL = "6.12.118+deb13-cloud-amd64"  # a '+' in the path: URL-encoded, as S3 needs
KEY = CacheKey("nvidia-current", "550.163.01", KERNEL, "x86_64", "proprietary")


@pytest.fixture
def bucket(tmp_path, monkeypatch):
    """A cache folder with one entry, served over https; the test's certificate trusted (SSL_CERT_FILE)."""
    folder = tmp_path / "www" / "modules"
    Store(folder).put(KEY, "gpunode-dkms-nvidia.deb", b"a package" * 1000, f"{KERNEL} SMP mod_unload modversions",
                      "builder-1")
    certs = tmp_path / "certs"
    certs.mkdir()
    with https_folder(tmp_path / "www", certs) as served:
        monkeypatch.setenv("SSL_CERT_FILE", str(served.ca_file))
        yield served, folder


def test_an_entry_is_fetched_into_the_mirror_and_checked(bucket, tmp_path):
    served, _ = bucket
    mirror = mirror_store(served.url, tmp_path / "home")
    entry = fetch(served.url, KEY, mirror)
    assert entry is not None and entry.problem() == ""
    assert entry.folder == mirror.folder(KEY) and entry.package.read_bytes() == b"a package" * 1000
    assert entry.built_on == f"builder-1 (via {served.url})"
    assert any("%2Bdeb13" in path for path in served.requests), served.requests  # '+' sent encoded
    assert source_of(Store(mirror.root).root) == served.url  # a Store made from the folder alone knows its URL
    assert Store(mirror.root).lookup(KEY) is not None


@pytest.mark.parametrize("status", [None, 403])
def test_a_missing_entry_is_none(bucket, tmp_path, status):
    served, _ = bucket
    other = CacheKey("nvidia-current", "550.163.01", "6.12.99-cloud-amd64", "x86_64", "proprietary")
    if status:
        served.status["manifest.json"] = status
    mirror = mirror_store(served.url, tmp_path / "home")
    assert fetch(served.url, other if not status else KEY, mirror) is None
    assert mirror.entries() == []


def test_a_damaged_package_is_refused_and_nothing_is_kept(bucket, tmp_path):
    served, folder = bucket
    entry = Store(folder).lookup(KEY)
    entry.package.write_bytes(entry.package.read_bytes() + b"tampered")
    mirror = mirror_store(served.url, tmp_path / "home")
    with pytest.raises(SourceError, match="sha256 differs"):
        fetch(served.url, KEY, mirror)
    assert mirror.entries() == []


def test_a_manifest_of_another_group_is_refused(bucket, tmp_path):
    served, folder = bucket
    manifest = folder / KEY.path / "manifest.json"
    data = json.loads(manifest.read_text())
    data["key"]["flavour"] = "open"
    manifest.write_text(json.dumps(data))
    with pytest.raises(SourceError, match="another group"):
        fetch(served.url, KEY, mirror_store(served.url, tmp_path / "home"))


def test_an_untrusted_certificate_is_refused(bucket, tmp_path, monkeypatch):
    served, _ = bucket
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "none.pem"))
    with pytest.raises(SourceError, match="CERTIFICATE_VERIFY_FAILED"):
        fetch(served.url, KEY, mirror_store(served.url, tmp_path / "home"))


@pytest.mark.parametrize("url", ["http://cache.example/modules", "s3://bucket/modules", "oss://bucket/m",
                                 "https://cache.example/m?x=1", "https:///nohost", "https://a b/m",
                                 "https://user:secret@cache.example/m", "https://cache.example:port/m"])
def test_only_plain_https_urls_are_caches(url):
    assert url_problem(url) and "secret" not in url_problem(url)
    with pytest.raises(ValueError, match="module cache URL"):
        check_cache_setting(url, "module_cache")


def test_an_https_setting_is_its_mirror_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    store = cache_store("https://bucket.s3.us-east-1.amazonaws.com/gpunode/modules")
    assert store is not None and store.root.is_relative_to(tmp_path / "gpunode" / "modules-from")
    assert store.root.name.startswith("bucket.s3.us-east-1.amazonaws.com-")
    assert source_of(store.root) == "https://bucket.s3.us-east-1.amazonaws.com/gpunode/modules"
    assert url_problem("https://bucket.s3.us-east-1.amazonaws.com/gpunode/modules") == ""


def test_a_bad_url_is_exit_2_before_any_host(tmp_path):
    """192.0.2.1 (TEST-NET-1) answers nothing: the refusal comes from reading the playbook."""
    book = tmp_path / "p.yml"
    book.write_text('steps:\n  - dkms_module: {name: m, version: "1", cache: "{{ module_cache }}"}\n')
    result = run_cli("provision", "-H", "192.0.2.1", "--playbook", str(book), "-e", "module_cache=s3://b/modules")
    assert result.code == 2, result.output
    assert "is not https" in result.output and "https://BUCKET.s3.REGION.amazonaws.com" in result.output
    assert "the value comes from the variable module_cache" in " ".join(result.output.split())  # wrapped text
    data = run_cli("user-data", "--module-cache", "http://cache.example/modules", "--playbook", "gpu-node")
    assert data.code == 2 and "is not https" in data.output and "--module-cache" in data.output, data.output


def test_cache_list_of_a_url_shows_its_mirror(bucket, tmp_path):
    served, _ = bucket
    fetch(served.url, KEY, mirror_store(served.url, tmp_path / "xdg" / "gpunode"))
    listed = run_cli("cache", "list", "--dir", served.url, "--json", env={"XDG_CACHE_HOME": str(tmp_path / "xdg")})
    assert listed.code == 0, listed.output
    (entry,) = json.loads(listed.stdout)["entries"]
    assert entry["kernel"] == KERNEL and entry["problem"] == "" and served.url in entry["built_on"]
    bad = run_cli("cache", "list", "--dir", "http://cache.example/modules")
    assert bad.code == 2 and "is not https" in bad.output, bad.output


def test_one_url_written_several_ways_is_one_mirror(tmp_path):
    """A trailing or doubled slash and the scheme's and host's case do not make another mirror (and build lock)."""
    ways = ["https://Cache.Example/gpunode/modules", "https://cache.example/gpunode/modules/",
            "HTTPS://cache.example//gpunode//modules", " https://cache.example/gpunode/modules"]
    assert len({mirror_store(url, tmp_path).root for url in ways}) == 1
    assert source_of(mirror_store(ways[0], tmp_path).root) == "https://cache.example/gpunode/modules"


def test_prune_of_a_url_says_the_bucket_is_unchanged(bucket, tmp_path):
    served, _ = bucket
    fetch(served.url, KEY, mirror_store(served.url, tmp_path / "xdg" / "gpunode"))
    pruned = run_cli("cache", "prune", "--dir", served.url, "--older-than", "0",
                     env={"XDG_CACHE_HOME": str(tmp_path / "xdg")})
    assert pruned.code == 0 and f"this controller's copy of {served.url}; the URL is unchanged" in pruned.stdout


@pytest.mark.parametrize("args", [
    ["--module-cache", "relcache"], ["--module-cache", "[a,b]"],
    ["--module-cache", "https://cache.example/m", "-e", "module_cache=off"]])
def test_user_data_refuses_a_relative_folder_or_a_second_setting(args):
    result = run_cli("user-data", "--playbook", "gpu-node", *args)
    assert result.code == 2 and "--module-cache" in result.output and "fix:" in result.output, result.output


def test_a_redirect_is_followed_only_to_https(bucket, tmp_path):
    """urllib alone would follow a 302 to http://, undoing the https-only rule."""
    served, folder = bucket
    package = Store(folder).lookup(KEY).file
    served.redirect[package] = f"http://127.0.0.1:9/{package}"
    with pytest.raises(SourceError, match="not https"):
        fetch(served.url, KEY, mirror_store(served.url, tmp_path / "a"))
    (folder / "moved.bin").write_bytes(Store(folder).lookup(KEY).package.read_bytes())
    served.redirect[package] = f"{served.url}/moved.bin"  # an https redirect (as a CDN gives) is followed
    assert fetch(served.url, KEY, mirror_store(served.url, tmp_path / "b")).problem() == ""
