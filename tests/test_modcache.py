"""The module cache's key, store and group lock, and its host scripts run by a real shell (no host needed)."""

from __future__ import annotations

import subprocess
import threading
import time

import pytest

from gpunode.modcache.key import CacheKey, key_for
from gpunode.modcache.remote import BEGIN, package_name, package_version, parse_pack
from gpunode.modcache.store import Store

KEY = CacheKey("nvidia-current", "535.309.01", "6.1.0-56-cloud-amd64", "x86_64", "proprietary")
VERMAGIC = "6.1.0-56-cloud-amd64 SMP preempt mod_unload modversions "


def test_key_names_every_part_of_the_group():
    assert KEY.path == "6.1.0-56-cloud-amd64/x86_64/nvidia-current-535.309.01-proprietary"
    open_key = CacheKey("nvidia-current", "535.309.01", "6.1.0-56-cloud-amd64", "x86_64", "open")
    other_kernel = CacheKey("nvidia-current", "535.309.01", "6.1.0-57-cloud-amd64", "x86_64", "proprietary")
    arm = CacheKey("nvidia-current", "535.309.01", "6.1.0-56-cloud-amd64", "aarch64", "proprietary")
    assert len({KEY.path, open_key.path, other_kernel.path, arm.path}) == 4
    with pytest.raises(ValueError, match="kernel"):
        CacheKey("m", "1", "../../etc", "x86_64")


def test_secure_boot_without_a_signer_builds_locally_and_says_why():
    key, why = key_for("m", "1", "6.1.0-56-cloud-amd64", "x86_64", secure_boot=True)
    assert key is None and "Secure Boot is on" in why and "builds its own" in why
    signed, _ = key_for("m", "1", "6.1.0-56-cloud-amd64", "x86_64", secure_boot=True, signer="ab12cd34" * 8)
    assert signed is not None and signed.path.endswith("-sb-ab12cd34ab12cd34")
    plain, _ = key_for("m", "1", "6.1.0-56-cloud-amd64", "x86_64", secure_boot=False, signer="ab12")
    assert plain is not None and plain.signer == ""


def test_store_put_lookup_and_refusals(tmp_path):
    store = Store(tmp_path)
    assert store.lookup(KEY) is None
    entry = store.put(KEY, "x.deb", b"package bytes", VERMAGIC, "gpu-1")
    assert (tmp_path / KEY.path / "manifest.json").exists() and entry.problem() == ""
    assert [e.key for e in store.entries()] == [KEY]
    entry.package.write_bytes(b"package bytes, tampered")
    assert "sha256" in store.lookup(KEY).problem()
    store.put(KEY, "x.deb", b"package bytes", "6.1.0-57-cloud-amd64 SMP", "gpu-1")
    assert "vermagic" in store.lookup(KEY).problem()
    store.remove(KEY)
    assert store.lookup(KEY) is None and store.entries() == []


def test_group_lock_makes_the_second_host_wait_for_the_first(tmp_path):
    store, order = Store(tmp_path), []

    def host(name: str, hold: float) -> None:
        with store.group_lock(KEY, timeout=10):
            order.append(f"{name} in")
            time.sleep(hold)
            order.append(f"{name} out")

    first = threading.Thread(target=host, args=("a", 0.6))
    first.start()
    time.sleep(0.2)
    host("b", 0)
    first.join()
    assert order == ["a in", "a out", "b in", "b out"]
    with store.group_lock(KEY, timeout=10), pytest.raises(TimeoutError, match="waited"), \
            Store(tmp_path).group_lock(KEY, timeout=0.5):
        pass


def test_cache_cli_lists_and_prunes(tmp_path):
    from gpunode.commands.cache_cmd import cache_command

    store = Store(tmp_path)
    store.put(KEY, "x.deb", b"p", VERMAGIC, "gpu-1")
    listing = cache_command("list", str(tmp_path), None, None, False, False)
    assert "nvidia-current/535.309.01 for 6.1.0-56-cloud-amd64" in listing and "built on gpu-1" in listing
    assert cache_command("prune", str(tmp_path), None, None, True, False) == "nothing to remove\n"
    assert "removed nvidia-current" in cache_command("prune", str(tmp_path), None, 0, False, False)
    assert store.entries() == []


def test_package_name_and_version_are_debian_ones():
    assert package_name(KEY) == "gpunode-dkms-nvidia-current-6.1.0-56-cloud-amd64"
    assert package_version(CacheKey("m", "v2_beta", "k", "x86_64")) == "0~v2+beta"
    out = subprocess.run(["sh", "-c", f"echo VERMAGIC='{VERMAGIC}'; echo FILE=a.deb; echo '{BEGIN}'; "
                          "printf abc | base64 -w0"], capture_output=True, text=True).stdout
    assert parse_pack(out) == (VERMAGIC, "a.deb", b"abc")


def test_user_data_refuses_a_module_cache_url():
    from tests.conftest import run_cli

    result = run_cli("user-data", "--module-cache", "https://example.com/modules")
    assert result.code == 2 and "--module-cache" in result.stderr and "mounted share" in result.stderr


@pytest.mark.extended  # builds a whole bundle (15-45 s)
def test_user_data_module_cache_becomes_the_playbook_variable(tmp_path):
    from tests.conftest import run_cli

    result = run_cli("user-data", "--playbook", "gpu-node", "--module-cache", "/mnt/share/modules", "--bundle-url",
                     "https://example.com/b.tar.xz", "--bundle-out", str(tmp_path / "b.tar.xz"))
    assert result.code == 0, result.output
    assert "module_cache=/mnt/share/modules" in result.stdout


def test_cache_bad_action_or_prune_without_filter_is_exit_2(tmp_path):
    """Trial of issue 29: `gpunode cache bogus` and `gpunode cache prune` (no filter) were exit 1, as if a host had
    failed; bad input is exit 2 with the fix."""
    from tests.conftest import run_cli
    for args in (("cache", "bogus"), ("cache", "prune", "--dir", str(tmp_path)),
                 ("cache", "list", "--dir", str(tmp_path / "mistyped"))):
        result = run_cli(*args)
        assert result.code == 2, result
        assert "fix:" in result.stderr
    assert not (tmp_path / "mistyped").exists()  # a mistyped --dir said "no entries" and exit 0
