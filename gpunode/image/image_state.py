"""A base image's pinned starting state (gpunode/image/states/<base>.yaml, each fact with its source): the facts a
plan starts from, and the answers its probe would get, so a bake can be planned before any instance exists.

The probe's package queries are answered as rpm answers them: `rpm -q NAME` by package name, `rpm -q --whatprovides
NAME` by what the package provides (curl-minimal provides curl), with rpm's own query format; `dnf versionlock list`
from the image's locks. On dpkg images (`manager: apt`) as dpkg answers them: `dpkg-query -W -f=FORMAT -- NAMES`
(installed packages only, sorted by name, as dpkg-query prints them), `apt-mark showhold` (no holds pinned: none), the
package-lists probe from `apt_lists` (`empty`: the image was built with /var/lib/apt/lists emptied) and the apt sources
probe from `apt_sources` (the vendor's files). A section the state cannot answer reads as empty and is named in the
plan.
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
from gpunode.steps.apt_sources import FILE_MARK, NO_EOL, SOURCES_GLOBS, sources_probe

STATES_DIR = Path(__file__).parent / "states"
UNKNOWN_RELEASE = "unknown"  # a package's release the source does not give (VERSION-unknown)
# Bases gpunode offers (`build-ami`/`build-image --base`) whose image content no vendor source read so far gives
# (gpunode/image/unpinned.yaml, base -> why): no state is pinned for them rather than one guessed; `plan --image` says
# why.
UNPINNED_FILE = Path(__file__).parent / "unpinned.yaml"
UNPINNED: dict[str, str] = {str(k): str(v) for k, v in (yaml.safe_load(UNPINNED_FILE.read_text()) or {}).items()}


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
    manager: str = "dnf"      # the image's package manager: dnf (rpm answers) or apt (dpkg answers)
    apt_lists: str = ""       # apt images: "empty" when the image ships no package lists; "" not pinned
    apt_sources: dict[str, str] = field(default_factory=dict)  # apt images: path -> content of each sources file
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
        why = f": {UNPINNED[base]}" if base in UNPINNED else ""
        raise UsageError(f"no pinned image state for base {base!r}{why}",
                         fix=f"plan from a pinned base: {', '.join(bases())} (gpunode/image/states/), or plan on a "
                             "host started from the image: gpunode provision -i INVENTORY --playbook P --check")
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
                      dict(data.get("containers") or {}), dict(data.get("nvidia") or {}),
                      manager=str(data.get("manager", "dnf")),
                      apt_lists=str((data.get("apt_lists") or {}).get("state", "")),
                      apt_sources=_sources_files(data))


def _sources_files(data: dict[str, Any]) -> dict[str, str]:
    """The `apt_sources: {files: {PATH: TEXT}}` of a state, with the suite named where the vendor's file has FAI's
    `{%SUITE%}` template variable (`apt_sources: {suite: bookworm}`)."""
    sources = data.get("apt_sources") or {}
    suite = str(sources.get("suite", ""))
    return {str(path): str(text).replace("{%SUITE%}", suite) for path, text in (sources.get("files") or {}).items()}


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
    if words[:2] == ["rpm", "-q"] and state.manager != "apt":
        return _rpm_query(state, words[2:])
    if state.manager == "apt":
        return _apt_answer(state, snippet, words)
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


# ---- dpkg answers (apt images) ------------------------------------------------------------------------------------
_DPKG_FIELD = re.compile(r"\$\{([\w:-]+)\}")
_SHELL_STOP = (";", "|", "||", "&&")


def _apt_answer(state: ImageState, snippet: str, words: list[str]) -> str:
    """dpkg-query -W, apt-mark showhold and the package-lists probe on a dpkg image; anything else unanswered."""
    if words[:2] == ["dpkg-query", "-W"] and not any(w in _SHELL_STOP for w in words):
        return _dpkg_query(state, words[2:])
    if words[:1] == ["apt-mark"] and "showhold" in words and not state.versionlock:
        return ""  # no hold pinned: apt-mark prints nothing
    if "/var/lib/apt/lists/*_Packages*" in snippet and state.apt_lists == "empty":
        return "0\n"  # no lists: the count (the folder's mtime and the clock are not pinned)
    if snippet == sources_probe() and state.apt_sources:
        return _sources_answer(state.apt_sources)
    state.unanswered.append(snippet)
    return ""


def _dpkg_query(state: ImageState, args: list[str]) -> str:
    """`dpkg-query -W [-f=FORMAT] [--] PATTERN...` as dpkg-query prints it: the installed packages matching any
    pattern, sorted by name, each through FORMAT (default `${binary:Package}\\t${Version}\\n`); the patterns with no
    match go to stderr, which the probe discards."""
    fmt, patterns = "${binary:Package}\t${Version}\n", []
    words = iter(args)
    for word in words:
        if word.startswith("2>"):
            break
        if word.startswith(("-f=", "--showformat=")):
            fmt = word.partition("=")[2]
        elif word in ("-f", "--showformat"):
            fmt = next(words, "")
        elif word != "--":
            patterns.append(word)
    found = sorted((p for p in state.packages.values() if any(fnmatch.fnmatchcase(p.name, pat) for pat in patterns)),
                   key=lambda p: p.name)
    return "".join(_dpkg_format(fmt, state, p) for p in found)


def _dpkg_format(fmt: str, state: ImageState, package: ImagePackage) -> str:
    """dpkg-query's --showformat for one installed package (${Package}, ${Version}, ${db:Status-Abbrev}...)."""
    version = _version(state, package.name) or ""
    fields = {"Package": package.name, "binary:Package": package.name, "Version": version,
              "db:Status-Abbrev": "ii ", "Status": "install ok installed", "db:Status-Status": "installed"}
    text = _DPKG_FIELD.sub(lambda m: fields.get(m.group(1), ""), fmt)
    return text.replace("\\t", "\t").replace("\\n", "\n")


def _sources_answer(files: dict[str, str]) -> str:
    """The apt sources probe's output: each pinned file in the probe's glob order (a glob expands sorted)."""
    out = []
    for pattern in SOURCES_GLOBS:
        for path in sorted(p for p in files if fnmatch.fnmatchcase(p, pattern)):
            text = files[path]
            out.append(f"{FILE_MARK}{path}\n{text}" + ("" if text.endswith("\n") or not text else f"\n{NO_EOL}\n"))
    return "".join(out)
