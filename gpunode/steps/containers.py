"""Container runtime steps: `docker`, `container_toolkit` (NVIDIA's repo, pinned packages) and
`container_runtime` (the nvidia runtime merged into daemon.json / a containerd drop-in)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from gpunode.connection import join, q
from gpunode.facts import Facts
from gpunode.gpu.distro import (
    STALE_TOOLKIT_LISTS,
    TOOLKIT_KEYRING,
    TOOLKIT_PACKAGES,
    TOOLKIT_REPO,
    docker_packages,
    docker_repo_file,
    toolkit_repo_file,
)
from gpunode.steps.base import Action, Step, StepContext, StepFailed, register
from gpunode.steps.pkgmgr import Wanted, manager_for
from gpunode.steps.remote_file import parse_file_probe, probe_file, write_action

DAEMON_JSON = "/etc/docker/daemon.json"
CONTAINERD_CONFIG = "/etc/containerd/config.toml"
CONTAINERD_DROPIN = "/etc/containerd/conf.d/99-nvidia.toml"


@register
@dataclass
class DockerStep(Step):
    """Docker engine from the distro, unless an engine (docker-ce, moby...) is already there; enabled and running."""

    kind = "docker"
    timeout: int = 1800

    def probe(self, facts: Facts) -> str:
        repo = docker_repo_file(facts.os)
        repo_probe = f"; echo @@repo; {probe_file(repo[0])}" if repo else ""
        return "systemctl show -p ActiveState -p UnitFileState docker 2>/dev/null; command -v dockerd || true" + \
            repo_probe

    def plan(self, ctx: StepContext) -> list[Action]:
        status, _, repo_probe = ctx.probe_output.partition("@@repo\n")
        props = dict(line.split("=", 1) for line in status.splitlines() if "=" in line)
        has_engine = ctx.facts.containers.docker_installed or "/dockerd" in status
        actions = []
        if not has_engine:
            manager = manager_for(ctx.facts.os.package_manager)
            names = docker_packages(ctx.facts.os)
            repo = docker_repo_file(ctx.facts.os)
            state = parse_file_probe(repo_probe)
            if repo and state.content != repo[1]:
                actions.append(write_action(repo[0], state, repo[1],
                                            reason="docker-ce comes from Docker's repository on EL"))
            actions.append(Action(f"install Docker: {', '.join(names)}", "no Docker engine installed",
                                  manager.install([Wanted(n) for n in names], refresh=True, recommends=False),
                                  timeout=self.timeout))
        if not has_engine or props.get("UnitFileState") != "enabled":
            actions.append(Action("enable docker", "the engine must start at boot", "systemctl enable docker"))
        if not has_engine or props.get("ActiveState") != "active":
            actions.append(Action("start docker", f"docker is {props.get('ActiveState', 'not installed')}",
                                  "systemctl start docker", fix="see `journalctl -u docker` on the host"))
        return actions


@register
@dataclass
class ContainerToolkitStep(Step):
    """NVIDIA's container toolkit from its repository (signed-by keyring), the four packages on one version."""

    kind = "container_toolkit"
    version: str | None = None          # e.g. 1.17.8-1; None = the repository's newest
    repo_url: str = TOOLKIT_REPO         # a mirror for air-gapped sites
    timeout: int = 1800

    def probe(self, facts: Facts) -> str:
        path, _ = toolkit_repo_file(facts.os, self.repo_url)
        stale = " ".join(f"[ -e {q(p)} ] && echo stale {q(p)};" for p in STALE_TOOLKIT_LISTS)
        manager = manager_for(facts.os.package_manager)
        return (f"{probe_file(path)}; echo @@; {stale} [ -s {TOOLKIT_KEYRING} ] && echo keyring; echo @@; "
                f"{manager.probe(list(TOOLKIT_PACKAGES))}")

    def plan(self, ctx: StepContext) -> list[Action]:
        facts = ctx.facts
        repo_probe, extra, pkg_probe = (ctx.probe_output.split("@@\n", 2) + ["", ""])[:3]
        path, content = toolkit_repo_file(facts.os, self.repo_url)
        actions = []
        stale = [line.split(None, 1)[1] for line in extra.splitlines() if line.startswith("stale ")]
        if stale:
            actions.append(Action(f"remove stale {', '.join(stale)}",
                                  'left by old nvidia-docker installs: apt fails with "Conflicting values set for '
                                  'option Signed-By"', f"rm -f -- {join(stale)}"))
        if facts.os.family == "debian" and "keyring" not in extra.split():
            key_url = q(f"{self.repo_url.rstrip('/')}/gpgkey")
            actions.append(Action(f"add NVIDIA's signing key as {TOOLKIT_KEYRING}", "repository key missing",
                                  f"curl -fsSL {key_url} | gpg --batch --yes --dearmor -o {TOOLKIT_KEYRING}",
                                  fix="check access to the repository (or give repo_url for a mirror)"))
        state = parse_file_probe(repo_probe)
        if state.content != content:
            actions.append(write_action(path, state, content, reason="NVIDIA container toolkit repository"))
        manager = manager_for(facts.os.package_manager)
        installed = manager.parse(pkg_probe.replace("@@lists", "@@lists", 1)).installed
        wanted = [Wanted(p, self.version) for p in TOOLKIT_PACKAGES]
        missing = [w for w in wanted if not w.satisfied_by(installed.get(w.name))]
        versions = {installed.get(p) for p in TOOLKIT_PACKAGES}
        if missing or len(versions) > 1:
            if not self.version:  # all four on one version: the one the repository offers now
                wanted = [Wanted(p) for p in TOOLKIT_PACKAGES]
            actions.append(Action(
                f"install the NVIDIA container toolkit {self.version or '(newest)'}: {', '.join(TOOLKIT_PACKAGES)}",
                "missing or on mixed versions", manager.install(wanted, refresh=True, recommends=False),
                timeout=self.timeout))
        return actions


@register
@dataclass
class ContainerRuntimeStep(Step):
    """Register the nvidia runtime with Docker (merged into daemon.json, every user key kept) and containerd
    (a drop-in file; the main config only gains an `imports` line), optionally as the default runtime."""

    kind = "container_runtime"
    docker: bool = True
    containerd: Literal["auto", "yes", "no"] = "auto"
    default_runtime: bool = False
    runtime_path: str = "nvidia-container-runtime"
    cdi: bool = False

    def probe(self, facts: Facts) -> str:
        return (f"{probe_file(DAEMON_JSON)}; echo @@; {probe_file(CONTAINERD_CONFIG)}; echo @@; "
                f"{probe_file(CONTAINERD_DROPIN)}; echo @@; containerd --version 2>/dev/null; echo @@; "
                "ls /etc/cdi/nvidia.yaml 2>/dev/null")

    def plan(self, ctx: StepContext) -> list[Action]:
        daemon, main, dropin, version, cdi = (ctx.probe_output.split("@@\n") + [""] * 5)[:5]
        actions = []
        if self.docker:
            actions += self._docker(parse_file_probe(daemon))
        has_containerd = bool(version.strip())
        if self.containerd == "yes" or (self.containerd == "auto" and has_containerd):
            actions += self._containerd(parse_file_probe(main), parse_file_probe(dropin), version)
        if self.cdi and "/etc/cdi/nvidia.yaml" not in cdi:
            actions.append(Action("generate the CDI spec /etc/cdi/nvidia.yaml", "cdi: true",
                                  "nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml",
                                  fix="the driver must be loaded (reboot first if it was just installed)"))
        return actions

    def _docker(self, state) -> list[Action]:
        try:
            config = json.loads(state.content) if state.exists and state.content.strip() else {}
        except json.JSONDecodeError as exc:
            raise StepFailed(f"{DAEMON_JSON} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
                             "it was left untouched", fix=f"fix {DAEMON_JSON} by hand (or restore a backup), then "
                             "run again") from None
        if not isinstance(config, dict):
            raise StepFailed(f"{DAEMON_JSON} is not a JSON object; it was left untouched", fix=f"fix {DAEMON_JSON}")
        merged = json.loads(json.dumps(config))
        merged.setdefault("runtimes", {})["nvidia"] = {"path": self.runtime_path, "args": []}
        if self.default_runtime:
            merged["default-runtime"] = "nvidia"
        if merged == config:
            return []
        text = json.dumps(merged, indent=4) + "\n"
        return [write_action(DAEMON_JSON, state, text, reason="nvidia runtime missing from Docker's config")]

    def _containerd(self, main, dropin, version: str) -> list[Action]:
        major = 2 if " v2." in version or " 2." in version else 1
        if major >= 2:  # containerd 2.x: config version 3, CRI runtime plugin renamed
            body = ('version = 3\n[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia]\n'
                    '  runtime_type = "io.containerd.runc.v2"\n'
                    '[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia.options]\n'
                    f'  BinaryName = "{self.runtime_path}"\n')
        else:
            body = ('version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n'
                    '  runtime_type = "io.containerd.runc.v2"\n'
                    '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]\n'
                    f'  BinaryName = "{self.runtime_path}"\n')
        if self.default_runtime:
            plugin = "io.containerd.cri.v1.runtime" if major >= 2 else "io.containerd.grpc.v1.cri"
            body += f'[plugins."{plugin}".containerd]\n  default_runtime_name = "nvidia"\n'
        content = "# Written by gpunode: the NVIDIA runtime for containerd.\n" + body
        actions = []
        if dropin.content != content:
            actions.append(write_action(CONTAINERD_DROPIN, dropin, content, reason="nvidia runtime drop-in"))
        new_main = _with_import(main.content if main.exists else "", "/etc/containerd/conf.d/*.toml", major)
        if new_main != (main.content if main.exists else None):
            actions.append(write_action(CONTAINERD_CONFIG, main, new_main,
                                        reason="containerd must import its conf.d drop-ins"))
        return actions


def _with_import(config: str, pattern: str, major: int) -> str:
    """The main containerd config with `pattern` in its top-level `imports` (added, never rewritten)."""
    lines = config.splitlines()
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("["):
            break
        if stripped.startswith("imports"):
            if pattern in stripped:
                return config
            head, _, rest = stripped.partition("[")
            items = rest.rstrip("]").strip()
            lines[i] = f'{head}[{items + ", " if items else ""}"{pattern}"]'
            return "\n".join(lines) + "\n"
    prefix = [] if any(ln.strip().startswith("version") for ln in lines) else [f"version = {3 if major >= 2 else 2}"]
    return "\n".join([*prefix, f'imports = ["{pattern}"]', *lines]) + "\n"
