"""The module cache's key, store and group lock, and its host scripts run by a real shell (no host needed)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from types import SimpleNamespace

import pytest

from gpunode.connection.base import ExecResult
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


@pytest.mark.extended  # builds a whole bundle (15-45 s)
def test_user_data_module_cache_becomes_the_playbook_variable(tmp_path):
    from tests.conftest import run_cli

    result = run_cli("user-data", "--playbook", "gpu-node", "--module-cache", "/mnt/share/modules", "--bundle-url",
                     "https://example.com/b.tar.xz", "--bundle-out", str(tmp_path / "b.tar.xz"))
    assert result.code == 0, result.output
    assert "--var 'module_cache=\"/mnt/share/modules\"'" in result.stdout  # a JSON string: read back as a string


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


class _Ctx:
    """A host for `apply_around`: records each command's label in order; `answers` maps a label's start to a result."""

    def __init__(self, answers: dict[str, ExecResult]) -> None:
        self.answers, self.ran, self.notes = answers, [], []
        self.host = SimpleNamespace(name="gpu-1")
        self.conn = SimpleNamespace(sensitive=False)

    def run(self, command: str, stdin: bytes | None = None, timeout: float = 0, label: str = "") -> ExecResult:
        self.ran.append(label)
        for start, result in self.answers.items():
            if label.startswith(start):
                return result
        return ExecResult(0, "", "", 0.0)


def _tar_action(tmp_path, mode: str):
    from gpunode.steps.module_cache import ModuleAction

    key = CacheKey("nvidia", "550.163.01", "5.14.0-503.el9.x86_64", "x86_64", "proprietary")
    return key, ModuleAction("x", "y", "z", key=key, root=str(tmp_path), mode=mode, form="tar")


def test_rpm_order_cached_tree_first_then_the_packages_then_dkms_install(tmp_path):
    """An entry of the group: placed before the packages go in (their %post finds it built), then `dkms install`."""
    from gpunode.steps.module_cache import apply_around

    key, action = _tar_action(tmp_path, "install")
    Store(tmp_path).put(key, "m.tar.gz", b"tgz", f"{key.kernel} SMP mod_unload ", "gpu-0")
    ctx = _Ctx({})
    done = apply_around(ctx, action, lambda: ctx.ran.append("dnf install") or True)
    assert done == "installed from the cache"
    assert ctx.ran == [f"place {key.label} from the module cache", "dnf install",
                       f"install {key.label} from the tree in place"]


def test_rpm_first_host_lets_the_post_build_and_publishes_the_tarball(tmp_path):
    import base64

    from gpunode.steps.module_cache import apply_around

    key, action = _tar_action(tmp_path, "build")
    packed = ExecResult(0, f"VERMAGIC={key.kernel} SMP mod_unload \nFILE=x.tar.gz\n{BEGIN}\n"
                           f"{base64.b64encode(b'tgz').decode()}\n", "", 0.0)
    ctx = _Ctx({"pack ": packed})
    assert apply_around(ctx, action, lambda: ctx.ran.append("dnf install") or True) == "built+published"
    assert ctx.ran[0] == "dnf install" and ctx.ran[1].startswith("build ") and ctx.ran[2].startswith("pack ")
    entry = Store(tmp_path).lookup(key)
    assert entry is not None and entry.package.read_bytes() == b"tgz" and entry.package.name == "x.tar.gz"


def test_rpm_install_of_another_version_takes_the_placed_tree_away(tmp_path):
    from gpunode.steps.module_cache import apply_around

    key, action = _tar_action(tmp_path, "install")
    Store(tmp_path).put(key, "m.tar.gz", b"tgz", f"{key.kernel} SMP mod_unload ", "gpu-0")
    ctx = _Ctx({})
    assert apply_around(ctx, action, lambda: False) == ""
    assert ctx.ran == [f"place {key.label} from the module cache", "take the placed tree away"]


def test_cache_list_and_prune_see_an_entry_whose_manifest_is_unreadable(tmp_path):
    """A hand-edited manifest (its key a list, or not JSON) is never used; list shows it, prune --invalid removes it
    (before, list said "no entries" and a key that was a list crashed gpunode)."""
    from tests.conftest import run_cli

    store = Store(tmp_path)
    key = CacheKey("m", "1.0", "6.1.0-56-cloud-amd64", "x86_64")
    entry = store.put(key, "m.deb", b"x", "6.1.0-56-cloud-amd64 SMP", "h1")
    manifest = entry.folder / "manifest.json"
    for broken in ('{"key": ["x"], "file": "m.deb", "sha256": "0", "vermagic": "v"}', "not json"):
        manifest.write_text(broken)
        assert store.lookup(key) is None
        listed = run_cli("cache", "list", "--dir", str(tmp_path), "--json")
        assert listed.code == 0, listed.output
        assert [u["folder"] for u in json.loads(listed.stdout)["unreadable"]] == [str(entry.folder)]
    pruned = run_cli("cache", "prune", "--dir", str(tmp_path), "--invalid")
    assert pruned.code == 0 and "unreadable manifest" in pruned.stdout and not entry.folder.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="a read-only bind mount needs root")
def test_a_read_only_cache_folder_is_read_with_its_lock_elsewhere(tmp_path, monkeypatch):
    """A share mounted read-only to hand built modules out: the group lock lives in the controller's cache home, the
    entry is read; a folder that cannot be written is refused only where something must be written."""
    source, mounted = tmp_path / "cache", tmp_path / "ro"
    key = CacheKey("m", "1.0", "6.1.0-56-cloud-amd64", "x86_64")
    Store(source).put(key, "m.deb", b"x", "6.1.0-56-cloud-amd64 SMP", "h1")
    mounted.mkdir()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home"))
    subprocess.run(["mount", "--bind", str(source), str(mounted)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(mounted)], check=True)
        store = Store(mounted)
        with store.group_lock(key, timeout=5):
            assert store.lookup(key) is not None and store.lookup(key).problem() == ""
        assert list((tmp_path / "home" / "gpunode" / "locks").glob("*/*.lock"))
        assert not (source / ".locks").exists()
        with pytest.raises(OSError):
            store.put(key, "m.deb", b"y", "6.1.0-56-cloud-amd64 SMP", "h2")
    finally:
        subprocess.run(["umount", str(mounted)], check=True)


@pytest.mark.parametrize("args", ['name: "../../etc", version: "1"', 'name: m, version: "1", kernel: "6.1; reboot"',
                                  'name: m, version: "1", flavour: a/b', 'name: m, version: "1", cache: /etc/passwd'])
def test_a_dkms_module_whose_names_cannot_be_a_cache_key_is_exit_2(tmp_path, args):
    """Names that become paths and commands on the host, and a cache "folder" that is a file, are refused when the
    playbook is read (exit 2, file:line), not as an internal error on each host; 192.0.2.1 answers nothing."""
    from tests.conftest import run_cli

    book = tmp_path / "p.yml"
    book.write_text(f"steps:\n  - dkms_module: {{{args}}}\n")
    result = run_cli("provision", "-H", "192.0.2.1", "--playbook", str(book))
    assert result.code == 2 and f"{book}:2:" in result.output and "internal error" not in result.output, result.output


def test_a_version_written_1_10_stays_1_10(tmp_path):
    """YAML reads `version: 1.10` as the number 1.1; a step's string argument gets the text as written (as Ansible
    keeps it), from the playbook and from --var alike."""
    from gpunode.app.variables import parse_vars
    from gpunode.steps.base import build_step
    from gpunode.yamlfile import load_yaml_text

    args = load_yaml_text("name: m\nversion: 1.10\n", "p.yml")
    assert build_step("dkms_module", dict(args)).version == "1.10"
    assert str(parse_vars(["v=1.10"])["v"]) == "1.10" and parse_vars(["v=1.10"])["v"] == 1.1
