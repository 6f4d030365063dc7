"""`dkms_module`: a DKMS module built for the target kernel once per group of hosts, installed from the module
cache everywhere else (gpunode/modcache)."""

from __future__ import annotations

from dataclasses import dataclass

from gpunode.connection import q
from gpunode.facts import Facts
from gpunode.parsers.dkms import dkms_installed, parse_dkms
from gpunode.steps.base import Action, Step, StepContext, arg, register
from gpunode.steps.cache_setting import check_cache_setting, check_key_names
from gpunode.steps.module_cache import ModuleAction, apply_module, plan_module
from gpunode.steps.probe import Snippets


@register
@dataclass
class DkmsModuleStep(Step):
    """A DKMS module (source in /usr/src/<name>-<version>, with its dkms.conf) built and installed for the target
    kernel; through the module cache unless `cache: off`."""

    kind = "dkms_module"
    disturbs_gpus = True
    facts_sections = frozenset()  # core only: kernel, architecture, Secure Boot
    name: str = arg("", "the module's DKMS name (its source is in /usr/src/<name>-<version>)")
    version: str = arg("", "the module's version, as in its dkms.conf")
    kernel: str = arg("", "the kernel to build for; default: the one that will run (the running one, or the one a "
                                "step installed)")
    flavour: str = arg("", "part of the cache key where a module comes in flavours (open/proprietary)")
    cache: str | bool = arg("", "the module cache: a folder on the controller, \"\" the default "
                                   "($XDG_CACHE_HOME/gpunode/modules), an https URL (read-only), off: build on every "
                                   "host")
    signer: str = arg("", "with Secure Boot on: the signing key's fingerprint (else the host builds its own)")
    timeout: int = arg(3600, "seconds for the build")

    def __post_init__(self) -> None:
        if not self.name or not self.version:
            raise ValueError("dkms_module needs name and version (the source is /usr/src/<name>-<version>)")
        check_key_names({"name": self.name, "version": self.version, "kernel": self.kernel, "flavour": self.flavour,
                         "signer": self.signer})
        check_cache_setting(self.cache, "cache")

    def probe(self, facts: Facts) -> Snippets:
        return {"dkms": f"dkms status -m {q(self.name)} -v {q(self.version)} 2>/dev/null"}

    def plan(self, ctx: StepContext) -> list[Action]:
        kernel = self.kernel or ctx.target_kernel
        if dkms_installed(parse_dkms(ctx.probe["dkms"]), (self.name,), kernel):
            return []
        return [plan_module(ctx, self.name, self.version, kernel, cache=self.cache, flavour=self.flavour,
                            signer=self.signer, timeout=self.timeout)]

    def apply(self, ctx: StepContext, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, ModuleAction):
                ctx.notes.append(f"{action.key.label if action.key else self.name}: {apply_module(ctx, action)}")
            else:
                super().apply(ctx, [action])
