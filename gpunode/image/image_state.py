"""A base image's pinned starting state (gpunode/image/states/<base>.yaml, each fact with its source): the facts a
plan starts from, and the answers its probe would get, so a bake can be planned before any instance exists.

The probe's package queries are answered as rpm answers them: `rpm -q NAME` by package name, `rpm -q --whatprovides
NAME` by what the package provides (curl-minimal provides curl), with rpm's own query format; `dnf versionlock list`
from the image's locks. A section the state cannot answer reads as empty and is named in the plan.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gpunode.errors import UsageError
from gpunode.facts import ContainerInfo, Facts, KernelInfo, NvidiaInfo, parse_os_release

STATES_DIR = Path(__file__).parent / "states"
UNKNOWN_RELEASE = "unknown"  # a package's release the source does not give (VERSION-unknown)


@dataclass(frozen=True)
class ImagePackage:
    """An installed package: its name, version (VERSION-RELEASE as rpm prints it) and what it provides."""

    name: str
    version: str
    provides: tuple[str, ...] = ()


@dataclass
class ImageState:
    """What the image holds before the bake's first step."""

    base: str
    os_release: str
    kernel: dict[str, Any]
    packages: dict[str, ImagePackage]
    versionlock: list[str] = field(default_factory=list)
    containers: dict[str, Any] = field(default_factory=dict)
    nvidia: dict[str, Any] = field(default_factory=dict)
    unanswered: list[str] = field(default_factory=list)  # probe commands the state could not answer

    def providers(self, name: str, by_provides: bool) -> list[ImagePackage]:
        """The installed packages `rpm -q` (or `rpm -q --whatprovides`) names for `name`."""
        return [p for p in self.packages.values() if p.name == name or (by_provides and name in p.provides)]


def bases() -> list[str]:
    """The bases with a pinned state."""
    return sorted(p.stem for p in STATES_DIR.glob("*.yaml"))


def _raw(base: str) -> dict[str, Any]:
    path = STATES_DIR / f"{base}.yaml"
    if not path.is_file():
        raise UsageError(f"no pinned image state for base {base!r}",
                         fix=f"use one of: {', '.join(bases())} (gpunode/image/states/)")
    data = yaml.safe_load(path.read_text())
    if data.get("extends"):
        parent = _raw(data["extends"])
        removed = {p["name"] for p in data.get("removed", [])}
        packages = [p for p in parent.get("packages", []) if p["name"] not in removed]
        data = {**parent, **data, "packages": packages + data.get("packages", []),
                "versionlock": parent.get("versionlock", []) + data.get("versionlock", [])}
    return data


def load_state(base: str) -> ImageState:
    """The pinned state of `base` (an `extends:` base's packages and locks first); unknown: UsageError (exit 2)."""
    data = _raw(base)
    release = data["os_release"]
    if "same_as" in release:
        release = _raw(release["same_as"])["os_release"]
    packages = {}
    for entry in data.get("packages", []):
        version = str(entry.get("version") or "unknown")
        packages[entry["name"]] = ImagePackage(entry["name"], f"{version}-{UNKNOWN_RELEASE}",
                                               tuple(entry.get("provides", ())))
    locks = [lock["pattern"] for lock in data.get("versionlock", [])]
    return ImageState(base, release["text"], dict(data["kernel"]), packages, locks,
                      dict(data.get("containers") or {}), dict(data.get("nvidia") or {}))


def facts_of(state: ImageState, arch: str = "x86_64") -> Facts:
    """The facts a run on the image would gather: its os-release, kernel, packages, container engines, driver."""
    running = str(state.kernel["running"])
    installed = {name: p.version for name, p in state.packages.items()}
    return Facts(
        os=parse_os_release(state.os_release, arch=arch),
        kernel=KernelInfo(running=running, installed=(running,), package=str(state.kernel.get("package", "")),
                          headers=(running,) if "kernel-devel" in state.packages else (),
                          running_headers_present="kernel-devel" in state.packages),
        nvidia=NvidiaInfo(driver_version=state.nvidia.get("driver_version")),
        containers=ContainerInfo(docker_installed=bool(state.containers.get("docker")),
                                 docker_version=_version(state, "docker"),
                                 containerd_version=_version(state, "containerd"),
                                 toolkit_installed="nvidia-container-toolkit" in state.packages),
        installed_packages=installed, complete=True)


def _version(state: ImageState, name: str) -> str | None:
    package = state.packages.get(name)
    return package.version.removesuffix(f"-{UNKNOWN_RELEASE}") if package else None


# ---- probe answers ----------------------------------------------------------------------------------------------
_QF_TAG = re.compile(r"%\{(\w+)\}")
_QF_ARRAY = re.compile(r"\[([^\]]*)\]")


def answer(state: ImageState, snippet: str) -> str:
    """What the image would print for one probe section: its rpm queries and versionlock list answered from the
    state, anything else empty (and noted in `state.unanswered`)."""
    try:
        words = shlex.split(snippet)
    except ValueError:
        words = []
    if words[:2] == ["rpm", "-q"]:
        return _rpm_query(state, words[2:])
    if "versionlock" in words and "list" in words:
        return "".join(f"{p.name}-0:{p.version}.*\n" for p in state.packages.values()
                       if any(fnmatch.fnmatch(p.name, lock) for lock in state.versionlock))
    state.unanswered.append(snippet)
    return ""


def _rpm_query(state: ImageState, args: list[str]) -> str:
    """`rpm -q [--whatprovides] [--qf FORMAT] [--] NAME...` as rpm prints it."""
    by_provides, fmt, names = False, "%{NAME}-%{VERSION}-%{RELEASE}.%{ARCH}\\n", []
    words = iter(args)
    for word in words:
        if word.startswith("2>") or word in (";", "|", "||", "&&"):
            break
        if word == "--whatprovides":
            by_provides = True
        elif word in ("--qf", "--queryformat"):
            fmt = next(words, "")
        elif word != "--":
            names.append(word)
    out = []
    for name in names:
        found = state.providers(name, by_provides)
        if not found:
            out.append(f"no package provides {name}\n" if by_provides else f"package {name} is not installed\n")
        out += [_format(fmt, p) for p in found]
    return "".join(out)


def _format(fmt: str, package: ImagePackage) -> str:
    """rpm's --queryformat for one package: NAME, VERSION, RELEASE, ARCH, EPOCH and [%{PROVIDENAME} ] arrays."""
    version, _, release = package.version.rpartition("-")
    tags = {"NAME": package.name, "VERSION": version, "RELEASE": release, "ARCH": "x86_64", "EPOCH": "(none)"}

    def array(match: re.Match[str]) -> str:
        # rpm keeps a package's provides (its own name among them) as a sorted set
        return "".join(match.group(1).replace("%{PROVIDENAME}", p) for p in sorted({package.name, *package.provides}))

    text = _QF_ARRAY.sub(array, fmt)
    text = _QF_TAG.sub(lambda m: tags.get(m.group(1), "(none)"), text)
    return text.replace("\\t", "\t").replace("\\n", "\n")
