"""`kernel_guard`: a kernel installed later (by hand, or by unattended upgrades) never becomes the boot default without
its DKMS module: kernel hooks on the node install the module from the module cache before dkms would compile it,
and keep the running kernel the boot default when the module is still missing (gpunode/modcache/guard_hooks.py).

Debian and Ubuntu: hooks in /etc/kernel/*postinst.d (run-parts) and GRUB's saved_entry. dnf hosts (EL 8/9, Amazon
Linux 2023, Alibaba Cloud Linux 3, TencentOS): kernel-install plugins in /etc/kernel/install.d around dkms's
40-dkms.install, and grubby's default (gpunode/modcache/guard_el.py); the same script, config, log and record."""

from __future__ import annotations

from dataclasses import dataclass

from gpunode.distros import for_os
from gpunode.facts import Facts
from gpunode.modcache.guard_el import (
    CACHE_PLUGIN,
    EL_READ_BY,
    el_guard_script,
    plugin_paths,
    plugin_text,
)
from gpunode.modcache.guard_hooks import CONF_FILE, SCRIPT, config_text, guard_script, hook_paths, hook_text
from gpunode.modcache.key import PLAIN_NAME
from gpunode.modcache.url_source import url_problem
from gpunode.steps.base import Action, ArgumentError, Step, StepContext, arg, register
from gpunode.steps.probe import Snippets
from gpunode.steps.remote_file import parse_file_probe, probe_file, write_action

# where each hook runs among the others in its folder (run-parts sorts by name)
_ORDER = {path: "before dkms" if name.startswith("50-") else
          "after dkms and zz-update-grub" if path.startswith("/etc/kernel/postinst.d/") else "after dkms"
          for path, name in hook_paths().items()}
# where each kernel-install plugin runs (kernel-install sorts every *.install by name: guard_el.py)
_ORDER.update({path: "before dkms's 40-dkms.install" if name == CACHE_PLUGIN else
               "after grubby's 20-grubby.install and dkms's 40-dkms.install" for path, name in plugin_paths().items()})


@register
@dataclass
class KernelGuardStep(Step):
    """Kernel hooks that give a later kernel its DKMS module from the module cache before dkms would build it, and
    keep the boot default at a kernel with the module when it is missing (verify-gpu says why)."""

    kind = "kernel_guard"
    facts_sections = frozenset()  # core only: os (family, architecture)
    module: str = arg("auto", "the DKMS module to guard; auto: the NVIDIA driver's (nvidia, nvidia-current, ...)")
    version: str = arg("", "its version; \"\": every version added to DKMS (the one the driver package added)")
    flavour: str = arg("auto", "the module cache key's flavour; auto: open/proprietary for NVIDIA modules, else none")
    cache: str = arg("", "the module cache as the node reads it: a folder on the node (an NFS mount of the "
                         "controller's cache) or an https URL; \"\": none (the hooks only keep the boot default)")

    def __post_init__(self) -> None:
        for name in ("module", "version", "flavour"):
            value = getattr(self, name)
            if value and not PLAIN_NAME.match(value):
                raise ArgumentError(f"kernel_guard.{name} {value!r} is not a plain name (letters, digits and "
                                    ". _ + ~ -)", name)
        cache = (self.cache or "").strip()
        if cache in ("off", "false", "no", "none"):
            cache = ""
        if "://" in cache:
            if problem := url_problem(cache):
                raise ArgumentError(problem, "cache")
        elif cache and not cache.startswith("/"):
            raise ArgumentError(f"kernel_guard.cache {cache!r} must be an absolute folder on the node (e.g. the "
                                "NFS mount of the module cache) or an https URL", "cache")
        elif any(c in cache for c in "\n'\"$`\\"):
            raise ArgumentError(f"kernel_guard.cache {cache!r} holds a quote, $, ` or a newline", "cache")
        self.cache = cache.rstrip("/") if cache != "/" else cache

    def _files(self, facts: Facts) -> dict[str, tuple[str, str]]:
        """Every file the guard writes: path -> (content, mode)."""
        distro = for_os(facts.os)
        form = distro.module_cache_form
        values = (self.module, self.version, self.flavour, "", self.cache)
        if distro.package_format != "deb":  # dnf: kernel-install plugins, grubby
            files = {SCRIPT: (el_guard_script(form), "0755")}
            files.update({path: (plugin_text(name), "0755") for path, name in plugin_paths().items()})
            files[CONF_FILE] = (config_text(*values, read_by=EL_READ_BY), "0644")
            return files
        files = {SCRIPT: (guard_script(form), "0755")}
        files.update({path: (hook_text(name), "0755") for path, name in hook_paths().items()})
        files[CONF_FILE] = (config_text(*values), "0644")
        return files

    def probe(self, facts: Facts) -> Snippets:
        return {f"file{i}": probe_file(path) for i, path in enumerate(self._files(facts))}

    def plan(self, ctx: StepContext) -> list[Action]:
        actions = []
        for i, (path, (content, mode)) in enumerate(self._files(ctx.facts).items()):
            state = parse_file_probe(ctx.probe[f"file{i}"])
            if state.exists and state.content == content and state.mode.lstrip("0") == mode.lstrip("0"):
                continue
            why = ("what the kernel hooks guard, and where the module cache is" if path == CONF_FILE else
                   "the kernel guard: a later kernel gets its module from the module cache, or stays out of the boot "
                   "default" if path == SCRIPT else f"kernel-install plugin (runs {_ORDER[path]})" if path.endswith(
                       ".install") else f"hook of the kernel packages (run-parts order: {_ORDER[path]})")
            actions.append(write_action(path, state, content, mode=mode, owner="root", group="root", backup=False,
                                        reason=why if not state.exists else "content or mode differs"))
        return actions
