"""The cache key: what must be identical for a built module to be loadable on another host."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

PLAIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+~-]*$")  # what a key's parts may hold


@dataclass(frozen=True)
class CacheKey:
    """One group: exact kernel release, module name and version, flavour (open/proprietary, "" when the module has
    one), architecture, and the Secure Boot signing key's fingerprint ("" when Secure Boot is off)."""

    module: str
    version: str
    kernel: str
    arch: str
    flavour: str = ""
    signer: str = ""

    def __post_init__(self) -> None:
        for name in ("module", "version", "kernel", "arch"):
            value = getattr(self, name)
            if not PLAIN_NAME.match(value):
                raise ValueError(f"module cache key: {name} {value!r} is not a plain name")
        for name in ("flavour", "signer"):
            value = getattr(self, name)
            if value and not PLAIN_NAME.match(value):
                raise ValueError(f"module cache key: {name} {value!r} is not a plain name")

    @property
    def path(self) -> str:
        """The entry's folder under the cache root: <kernel>/<arch>/<module>-<version>[-<flavour>][-sb-<signer>]."""
        leaf = f"{self.module}-{self.version}"
        if self.flavour:
            leaf += f"-{self.flavour}"
        if self.signer:
            leaf += f"-sb-{self.signer[:16]}"
        return f"{self.kernel}/{self.arch}/{leaf}"

    @property
    def label(self) -> str:
        extra = "".join(f", {v}" for v in (self.flavour, self.signer and f"signed by {self.signer[:16]}") if v)
        return f"{self.module}/{self.version} for {self.kernel} ({self.arch}{extra})"

    def as_dict(self) -> dict[str, str]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, str]) -> CacheKey:
        """The key a manifest holds; ValueError when it is not a mapping of plain names."""
        if not isinstance(data, dict):
            raise ValueError(f"a cache key is a mapping, not {type(data).__name__}")
        return cls(**{k: str(data.get(k, "")) for k in ("module", "version", "kernel", "arch", "flavour", "signer")})


def key_for(module: str, version: str, kernel: str, arch: str, flavour: str = "", secure_boot: bool | None = False,
            signer: str = "") -> tuple[CacheKey | None, str]:
    """The host's group, or None and why the module must be built locally (Secure Boot on and no signing key
    fingerprint known: a module signed by another key would not load, an unsigned one neither)."""
    if secure_boot and not signer:
        return None, ("Secure Boot is on and no signing key fingerprint was given (module_cache_signer): a cached "
                      "module signed with another key would not load, so this host builds its own")
    return CacheKey(module, version, kernel, arch, flavour, signer if secure_boot else ""), ""
