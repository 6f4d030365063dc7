"""The NVIDIA driver step with `module_cache` on, planned from the Debian 12 and Rocky 9 plan cases' host states:
the driver packages go in with DKMS's autoinstall paused, the module is built once per group and installed from the
cache elsewhere; on RPM hosts (whose kmod %post builds at once) the same install, the cached build put in place
first; `module_cache: off` plans exactly as before."""

from __future__ import annotations

from pathlib import Path

from gpunode.modcache.key import CacheKey
from gpunode.modcache.store import Store
from gpunode.steps.base import build_step
from tests.plan_cases import context, find_case, mismatches, run_case

KERNEL = "6.1.0-27-cloud-amd64"


def _plan(case_name: str, host: str, check: bool = True, probe: dict | None = None, **args):
    case = find_case("nvidia_driver", case_name)
    case = {**case, "check": check, "probe": {**(case.get("probe") or {}), **(probe or {})}}
    step = build_step("nvidia_driver", {**(case.get("args") or {}), **args})
    return step.plan(context(case, host, step))


def _install(actions):
    (install,) = [a for a in actions if a.summary.startswith("install the NVIDIA")]
    return install


def test_fresh_debian_host_installs_with_autoinstall_paused(tmp_path):
    install = _install(_plan("debian12-fresh", "gpu-1", check=False, module_cache=str(tmp_path)))
    assert install.summary.endswith("(the kernel module from the module cache)")
    assert install.command.startswith("mine=; if [ ! -e /etc/dkms/no-autoinstall ] || [ \"$(head -n 1 "
                                      "/etc/dkms/no-autoinstall 2>/dev/null)\" = '# gpunode: DKMS autoinstall")
    assert "trap '[ -z \"$mine\" ] || rm -f /etc/dkms/no-autoinstall' EXIT" in install.command


def test_check_mode_says_which_host_builds_and_which_installs_from_the_cache(tmp_path):
    """Issue 30: check mode names the host that builds each group and those that install from the cache. The group
    key's version is the one the package lists offer (the `candidate` probe: apt's candidate, cut to upstream)."""
    offered = {"candidate": "535.309.01\n"}
    first = _install(_plan("debian12-fresh", "gpu-a", probe=offered, module_cache=str(tmp_path)))
    second = _install(_plan("debian12-fresh", "gpu-b", probe=offered, module_cache=str(tmp_path)))
    assert first.summary.endswith(f"(kernel module: build nvidia-current/535.309.01 for kernel {KERNEL} with DKMS and "
                                  "add it to the module cache)"), first.summary
    assert second.summary.endswith(f"(kernel module: wait for gpu-a's DKMS build of nvidia-current/535.309.01 for "
                                   f"kernel {KERNEL}, then install it from the module cache)"), second.summary
    key = CacheKey("nvidia-current", "535.309.01", KERNEL, "x86_64", "proprietary")
    Store(tmp_path).put(key, "x.deb", b"deb", f"{KERNEL} SMP mod_unload modversions ", "gpu-a")
    third = _install(_plan("debian12-fresh", "gpu-c", probe=offered, module_cache=str(tmp_path)))
    assert third.summary.endswith(f"(kernel module: install nvidia-current/535.309.01 for kernel {KERNEL} from the "
                                  "module cache (built on gpu-a))"), third.summary
    unknown = _install(_plan("debian12-fresh", "gpu-d", module_cache=str(tmp_path)))
    assert "else built by the group's first host; its version is not known before the install)" in unknown.summary
    applying = _install(_plan("debian12-fresh", "gpu-e", check=False, probe=offered, module_cache=str(tmp_path)))
    assert applying.summary.endswith("(the kernel module from the module cache)") and applying.version == "535.309.01"


def test_the_candidate_is_asked_only_where_the_driver_is_not_installed(tmp_path):
    """The probe asks apt's candidate (cheap, the host's lists) only with the cache on and the driver not installed."""
    case = find_case("nvidia_driver", "debian12-fresh")
    on = build_step("nvidia_driver", {**(case.get("args") or {}), "module_cache": str(tmp_path)})
    off = build_step("nvidia_driver", {**(case.get("args") or {}), "module_cache": "off"})
    facts = context(case).facts
    assert on.probe(facts)["candidate"] == ("apt-cache show --no-all-versions -- nvidia-kernel-dkms 2>/dev/null | "
                                            "sed -n 's/^Version: //p' | head -n 1 | sed 's/^[0-9]*://; s/-[^-]*$//'")
    assert "candidate" not in off.probe(facts)
    installed = context({**case, "facts": {**case["facts"], "installed_packages": {"nvidia-kernel-dkms": "535"}}})
    assert "candidate" not in on.probe(installed.facts)


def test_half_converged_hosts_of_one_group_one_builds_the_others_wait(tmp_path):
    first = _plan("debian12-half-converged", "gpu-a", module_cache=str(tmp_path))[0]
    second = _plan("debian12-half-converged", "gpu-b", module_cache=str(tmp_path))[0]
    assert first.summary.startswith("build nvidia-current/535.") and "add it to the module cache" in first.summary
    assert second.summary.startswith("wait for gpu-a's DKMS build of nvidia-current/535.")
    key = first.key
    assert key.kernel == KERNEL and key.flavour == "proprietary" and key.module == "nvidia-current"
    Store(tmp_path).put(key, "x.deb", b"deb", f"{KERNEL} SMP mod_unload modversions ", "gpu-a")
    third = _plan("debian12-half-converged", "gpu-c", module_cache=str(tmp_path))[0]
    assert third.summary.startswith("install nvidia-current/535.") and "built on gpu-a" in third.summary


def test_off_plans_as_before(tmp_path):
    for name in ("debian12-half-converged", "debian12-fresh", "rocky9-fresh"):
        case = find_case("nvidia_driver", name)
        assert not mismatches(case["expect"], run_case({**case, "args": {**(case.get("args") or {}),
                                                                          "module_cache": "off"}})), name
    assert not list(tmp_path.iterdir())
    assert CacheKey("m", "1", KERNEL, "x86_64").path.startswith(KERNEL)


def test_rpm_installs_as_before_with_the_cached_build_put_in_place_first(tmp_path):
    """NVIDIA's kmod %post builds at once and no setting pauses it: the install command is the one without the cache
    (no no-autoinstall file), and the version the repository installs is asked first, changing nothing."""
    off = _plan("rocky9-fresh", "gpu-1", module_cache="off")
    on = _plan("rocky9-fresh", "gpu-1", module_cache=str(tmp_path))
    assert [a.command for a in on] == [a.command for a in off]
    install = _install(on)
    assert install.summary.endswith("(kernel module: from the module cache if its group's entry is there, else built "
                                    "by the group's first host; its version is not known before the install)")
    assert _install(_plan("rocky9-fresh", "gpu-1", check=False, module_cache=str(tmp_path))).summary.endswith(
        "(the kernel module from the module cache, put in place first)")
    assert "dkms skips a module already built" in install.reason
    assert "--repofrompath=gpunode-nvidia,https://developer.download.nvidia.com/compute/cuda/repos/rhel9/x86_64 " \
        "--repo=gpunode-nvidia --setopt=*.module_hotfixes=true repoquery --latest-limit=1 --queryformat " \
        "'%{version}' 'kmod-nvidia-latest-dkms-550.*'" in install.version_probe
    assert not list(tmp_path.iterdir())


def test_precompiled_installs_plan_as_before_with_the_cache_on(tmp_path):
    """Ubuntu's signed precompiled modules (issue 30's "precompiled first") are not DKMS builds: nothing to cache."""
    for name in ("ubuntu2204-precompiled-fresh", "ubuntu2404-secure-boot-precompiled-fresh"):
        find_case("nvidia_driver", name)  # a hand-written case of tests/plans/nvidia_driver.yaml
        actions = _plan(name, "gpu-1", module_cache=str(tmp_path))
        assert not any("module cache" in a.summary for a in actions), [a.summary for a in actions]
        assert not any("no-autoinstall" in (a.command or "") for a in actions)


def test_an_unquoted_off_is_off(tmp_path):
    """`--var module_cache=off` reaches the step as YAML's false: no cache; true is the default folder."""
    from gpunode.steps.cache_setting import cache_store

    case = find_case("nvidia_driver", "debian12-half-converged")
    off = {**case, "args": {**(case.get("args") or {}), "module_cache": False}}
    assert not mismatches(case["expect"], run_case(off))
    assert build_step("dkms_module", {"name": "m", "version": "1", "cache": False}).cache is False
    assert cache_store(False) is None and cache_store("off") is None and cache_store(True).root == Store().root


def test_cache_words_from_an_ini_inventory_are_switches_not_folders():
    """An INI inventory gives `package_cache=true` / `module_cache=yes` as strings: they mean the default folder, not
    a folder called `true` in the current directory; "0"/"none" mean off; anything else is a folder."""
    from gpunode.pkgshare.store import default_root
    from gpunode.steps.cache_setting import cache_store
    from gpunode.steps.package_share import share_for

    for word in ("true", "True", "yes", "on", "1", 1, "", "  "):
        assert cache_store(word).root == Store().root, word
        assert share_for(word).keywords["store"].root == default_root(), word
    for word in ("false", "off", "no", "0", 0, "none", None):
        assert cache_store(word) is None and share_for(word) is None, word
    assert cache_store("/srv/modules").root == Path("/srv/modules")
    assert share_for("/srv/pkgs").keywords["store"].root == Path("/srv/pkgs")


def test_a_failed_build_names_what_dkms_said_is_missing():
    """dkms 3.0.10's own lines (lab, 2026-11-25): a missing source or missing headers get their own fix, not the
    headers-and-make.log one (no make.log exists then)."""
    from gpunode.steps.module_cache import build_fix

    source = "Error! Could not find module source directory.\nDirectory: /usr/src/nosuch-mod-2.0 does not exist."
    headers = ("Error! Your kernel headers for kernel 6.1.0-99-cloud-amd64 cannot be found at "
               "/lib/modules/6.1.0-99-cloud-amd64/build or /lib/modules/6.1.0-99-cloud-amd64/source.")
    assert "source with its dkms.conf in /usr/src/nosuch-mod-2.0 " in build_fix("default", source)
    assert "install the headers of kernel 6.1.0-99-cloud-amd64 " in build_fix("default", headers)
    assert build_fix("default", "make: *** [Makefile:5: all] Error 2") == "default"
