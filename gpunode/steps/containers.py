"""Container runtime steps: `docker`, `container_toolkit` (NVIDIA's repo, pinned packages) and
`container_runtime` (the nvidia runtime merged into daemon.json / a containerd drop-in)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from gpunode.connection import join, q
from gpunode.distros import for_os
from gpunode.distros.repos import STALE_TOOLKIT_LISTS, TOOLKIT, TOOLKIT_KEYRING, TOOLKIT_PACKAGES, TOOLKIT_REPO
from gpunode.facts import Facts
from gpunode.parsers.containers import containerd_major, toolkit_version
from gpunode.parsers.systemd import parse_unit
from gpunode.steps.base import Action, Step, StepContext, StepFailed, arg, register
from gpunode.steps.kube_node import parse as parse_kube_node
from gpunode.steps.kube_node import probe_snippet, verify_only
from gpunode.steps.pkgmgr import AptManager, Wanted, manager_for
from gpunode.steps.probe import Snippets, nested
from gpunode.steps.remote_file import FileState, parse_file_probe, probe_file, write_action
from gpunode.values import kind_of
from gpunode.vendor_facts import value as fact_value

if TYPE_CHECKING:  # tomlkit (containerd_config) is imported only when a plan touches containerd
    from gpunode.steps.containerd_config import Loaded

DAEMON_JSON = "/etc/docker/daemon.json"
CONTAINERD_CONFIG = "/etc/containerd/config.toml"
CONTAINERD_DROPIN = "/etc/containerd/conf.d/99-nvidia.toml"  # where older gpunode releases put the runtime
OLD_DROPIN_HEADER = "# Written by gpunode: the NVIDIA runtime for containerd."
CDI_STATIC = "/etc/cdi/nvidia.yaml"        # nvidia-ctk cdi generate (toolkit < 1.18)
CDI_DYNAMIC: str = fact_value(TOOLKIT, "cdi_dynamic_spec")  # nvidia-cdi-refresh (toolkit 1.18+)
# Packages that bring containerd with them (Debian's docker.io depends on containerd; docker-ce on containerd.io)
CONTAINERD_PROVIDERS = frozenset({"containerd", "containerd.io", "docker.io", "docker-ce", "moby-engine", "docker",
                                  "moby-containerd"})


@register
@dataclass
class DockerStep(Step):
    """Docker engine from the distro, unless an engine (docker-ce, moby...) is already there; enabled and running."""

    kind = "docker"
    facts_sections = frozenset({"pkgmgr", "packages", "services", "containers"})
    timeout: int = arg(1800, "seconds for the install")
    install: Literal["auto", "yes", "no"] = arg("yes", "auto: not on a Kubernetes node that runs containerd (kubelet "
                                                "found), where pods never use Docker; yes: always; no: never")

    def probe(self, facts: Facts) -> Snippets:
        repo = for_os(facts.os).docker_repo_file()
        snippets = {"status": "systemctl show -p ActiveState -p UnitFileState docker 2>/dev/null; "
                              "command -v dockerd; command -v docker", "kube_node": probe_snippet()}
        if repo:
            snippets["repo"] = probe_file(repo[0])
        return snippets

    def plan(self, ctx: StepContext) -> list[Action]:
        status = ctx.probe["status"]
        unit = parse_unit(status)
        paths = [line.strip() for line in status.splitlines() if line.startswith("/")]
        has_engine = ctx.facts.containers.docker_installed or any(p.endswith("/dockerd") for p in paths)
        has_client = any(p.endswith("/docker") for p in paths)
        if self._left_out(ctx, has_engine):
            return []
        names = for_os(ctx.facts.os).docker_packages()
        actions = []
        manager = manager_for(ctx.facts.os.package_manager)
        if not has_engine:
            actions += self._repo_actions(ctx)
            ctx.will_install(names)
            actions.append(Action(f"install Docker: {', '.join(names)}", "no Docker engine installed",
                                  manager.install([Wanted(n) for n in names], refresh=True, recommends=False),
                                  timeout=self.timeout, installs=tuple(names)))
        elif not has_client and names[0] == "docker.io" and len(names) > 1:  # Debian 13: docker.io only
            # recommends its client
            actions.append(Action(f"install the Docker client: {', '.join(names[1:])}", "no docker command",
                                  manager.install([Wanted(n) for n in names[1:]], refresh=True, recommends=False),
                                  timeout=self.timeout))
        if not has_engine or unit.unit_file_state != "enabled":
            actions.append(Action("enable docker", "the engine must start at boot", "systemctl enable docker"))
        if not has_engine or unit.active_state != "active":
            state = "not installed" if unit.active_state is None else unit.active_state
            actions.append(Action("start docker", f"docker is {state}",
                                  "systemctl start docker", fix="see `journalctl -u docker` on the host"))
        return actions

    @staticmethod
    def _repo_actions(ctx: StepContext) -> list[Action]:
        """Docker's repository file where the distro takes Docker from it (EL): the probe asks for `repo` only
        there."""
        repo = for_os(ctx.facts.os).docker_repo_file()
        if not repo:
            return []
        state = parse_file_probe(ctx.probe["repo"])
        if state.content == repo[1]:
            return []
        return [write_action(repo[0], state, repo[1], reason="docker-ce comes from Docker's repository on EL")]

    def _left_out(self, ctx: StepContext, has_engine: bool) -> bool:
        """install: no, or auto on a Kubernetes node without an engine: no Docker (later steps are told)."""
        left_out = self.install == "no" or (not has_engine and self._kubernetes_containerd(ctx))
        ctx.state.docker_left_out = left_out
        return left_out

    def _kubernetes_containerd(self, ctx: StepContext) -> bool:
        """install: auto on a Kubernetes node whose pods run on containerd: no Docker, and the plan says why."""
        node = parse_kube_node(ctx.probe["kube_node"])
        containerd = ctx.facts.containers.containerd_version
        if self.install != "auto" or not node.is_kubernetes or not containerd:
            return False
        ctx.notes.append(f"Docker not installed: a Kubernetes node (kubelet {node.kubelet[0]}) whose pods run on "
                         f"containerd ({containerd}); a Docker engine beside it serves no pod and brings a second "
                         "containerd package. install_docker: true installs it anyway")
        return True


@register
@dataclass
class ContainerToolkitStep(Step):
    """NVIDIA's container toolkit from its repository (signed-by keyring), the four packages on one version."""

    kind = "container_toolkit"
    facts_sections = frozenset({"pkgmgr", "packages", "services", "containers"})
    version: str | None = arg(None, "the four packages' version, e.g. 1.17.8-1; none: the repository's newest")
    repo_url: str = arg(TOOLKIT_REPO, "NVIDIA's repository, or a mirror for air-gapped sites")
    timeout: int = arg(1800, "seconds for the install")
    cloud_driver: Literal["keep", "replace"] = arg("keep", "keep: on a Kubernetes node whose cloud installed the "
                                                   "driver and runs NVIDIA's device plugin (ACK, TKE), an installed "
                                                   "toolkit is verified only; replace: NVIDIA's repository and "
                                                   "packages as on any host")

    def probe(self, facts: Facts) -> Snippets:
        path, _ = for_os(facts.os).toolkit_repo_file(self.repo_url)
        stale = " ".join(f"[ -e {q(p)} ] && echo stale {q(p)};" for p in STALE_TOOLKIT_LISTS)
        manager = manager_for(facts.os.package_manager)
        # the key is fetched with curl (https: CA certificates) and dearmored with gpg, which minimal images lack
        tools = ("command -v curl >/dev/null || echo no-curl; command -v gpg >/dev/null || echo no-gpg; "
                 "[ -s /etc/ssl/certs/ca-certificates.crt ] || echo no-ca-certificates; "
                 if for_os(facts.os).toolkit_needs_keyring() else "")
        return {"repo": probe_file(path), "extra": f"{stale} {tools}[ -s {TOOLKIT_KEYRING} ] && echo keyring",
                "kube_node": probe_snippet(), **nested("pkgs", manager.probe(list(TOOLKIT_PACKAGES)))}

    def plan(self, ctx: StepContext) -> list[Action]:
        if self.cloud_driver == "keep" and ctx.facts.containers.toolkit_installed:
            kept = verify_only(ctx, "NVIDIA container toolkit", "nvidia-container-cli --version", "cloud_driver")
            if kept:
                return kept
        facts = ctx.facts
        path, content = for_os(facts.os).toolkit_repo_file(self.repo_url)
        actions = self._source_actions(facts, ctx.probe["extra"])
        state = parse_file_probe(ctx.probe["repo"])
        if state.content != content:
            actions.append(write_action(path, state, content, reason="NVIDIA container toolkit repository"))
        manager = manager_for(facts.os.package_manager)
        installed = manager.parse(ctx.probe.within("pkgs")).installed
        wanted = [Wanted(p, self.version) for p in TOOLKIT_PACKAGES]
        missing = [w for w in wanted if not w.satisfied_by(installed.get(w.name))]
        versions = {installed.get(p) for p in TOOLKIT_PACKAGES}
        if missing or len(versions) > 1:
            if not self.version:  # all four on one version: the one the repository offers now
                wanted = [Wanted(p) for p in TOOLKIT_PACKAGES]
            actions.append(Action(
                f"install the NVIDIA container toolkit {self.version or '(newest)'}: {', '.join(TOOLKIT_PACKAGES)}",
                "missing or on mixed versions", manager.install(wanted, refresh=True, recommends=False),
                timeout=self.timeout, fix=self._repo_fix(), installs=tuple(AptManager.specs(wanted))))
        return actions

    def _source_actions(self, facts: Facts, extra: str) -> list[Action]:
        """Stale nvidia-docker lists removed; NVIDIA's signing key (and the tools that fetch it) on apt hosts."""
        actions = []
        stale = [line.split(None, 1)[1] for line in extra.splitlines() if line.startswith("stale ")]
        if stale:
            actions.append(Action(f"remove stale {', '.join(stale)}",
                                  'left by old nvidia-docker installs: apt fails with "Conflicting values set for '
                                  'option Signed-By"', f"rm -f -- {join(stale)}"))
        if for_os(facts.os).toolkit_needs_keyring() and "keyring" not in extra.split():
            # NVIDIA's install guide installs these first (`apt-get install -y --no-install-recommends curl gnupg2`,
            # docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html, "With apt")
            tools = [package for marker, package in (("no-curl", "curl"), ("no-gpg", "gnupg"),
                                                     ("no-ca-certificates", "ca-certificates"))
                     if marker in extra.split()]
            if tools:
                manager = manager_for(facts.os.package_manager)
                actions.append(Action(f"install {', '.join(tools)} (to fetch NVIDIA's signing key)",
                                      "not on the host", manager.install([Wanted(t) for t in tools], refresh=True,
                                                                         recommends=False),
                                      timeout=self.timeout, fix="check the host's apt sources and network"))
            key_url = q(f"{self.repo_url.rstrip('/')}/gpgkey")
            actions.append(Action(f"add NVIDIA's signing key as {TOOLKIT_KEYRING}", "repository key missing",
                                  f"curl -fsSL {key_url} | gpg --batch --yes --dearmor -o {TOOLKIT_KEYRING}",
                                  fix=self._repo_fix()))
        return actions

    def _repo_fix(self) -> str:
        return (f"check that the host reaches {self.repo_url} (NVIDIA's repository, not Debian's); or use a mirror of "
                "it: the variable container_toolkit_repo of the gpu-node playbook (`repo_url` of a container_toolkit "
                "step of your own), e.g. --var container_toolkit_repo=https://mirror.example/libnvidia-container; or "
                "install_container_toolkit=false")


@register
@dataclass
class ContainerRuntimeStep(Step):
    """Register the nvidia runtime with Docker (merged into daemon.json, every user key kept) and containerd
    (added to config.toml in place, as `nvidia-ctk runtime configure` does: a copy of runc's settings, comments
    and every other key kept), optionally as the default runtime; optionally a CDI spec."""

    kind = "container_runtime"
    facts_sections = frozenset({"pkgmgr", "packages", "services", "containers"})
    docker: bool = arg(True, "register the runtime in /etc/docker/daemon.json")
    containerd: Literal["auto", "yes", "no"] = arg("auto", "register it in /etc/containerd/config.toml; auto: "
                                                   "when containerd is installed")
    default_runtime: bool = arg(False, "make nvidia the default runtime")
    runtime_path: str = arg("nvidia-container-runtime", "the runtime's program")
    cdi: bool = arg(False, "a CDI spec for the GPUs (nvidia-cdi-refresh, or nvidia-ctk cdi generate)")

    def probe(self, facts: Facts) -> Snippets:
        return {
            "daemon": probe_file(DAEMON_JSON),
            "main": probe_file(CONTAINERD_CONFIG),
            "dropin": probe_file(CONTAINERD_DROPIN),
            "version": "containerd --version 2>/dev/null",
            "dump": "command -v containerd >/dev/null && containerd config dump 2>/dev/null",
            "default": "command -v containerd >/dev/null && containerd config default 2>/dev/null",
            "ctk": "nvidia-ctk --version 2>/dev/null | head -n 1",
            "cdi": f"ls {CDI_STATIC} {CDI_DYNAMIC} 2>/dev/null; "
                   "systemctl is-enabled nvidia-cdi-refresh.path 2>/dev/null",
        }

    def plan(self, ctx: StepContext) -> list[Action]:
        sections = ctx.probe
        actions = []
        if self.cdi:  # first: it fails without the toolkit, and then nothing else is half-done
            actions += self._cdi(sections["ctk"], sections["cdi"])
        if self.docker and ctx.state.docker_left_out:
            ctx.notes.append(f"{DAEMON_JSON} left alone: the Docker step installed no engine")
        elif self.docker:
            actions += self._docker(parse_file_probe(sections["daemon"]))
        version = sections["version"]
        if self.containerd == "auto" and not version.strip():
            actions += _containerd_coming(ctx)
        elif self.containerd == "yes" or (self.containerd == "auto" and version.strip()):
            from gpunode.steps.containerd_config import loaded_config

            actions += self._containerd(ctx, parse_file_probe(sections["main"]),
                                        parse_file_probe(sections["dropin"]), version,
                                        loaded_config(sections["dump"], sections["default"]))
        return actions

    def _docker(self, state: FileState) -> list[Action]:
        if state.content.startswith("\ufeff"):
            raise StepFailed(f"{DAEMON_JSON} starts with a UTF-8 byte order mark (BOM): dockerd refuses the file; it "
                             "was left untouched", fix=f"remove the mark (the first 3 bytes): "
                             f"sed -i '1s/^\\xEF\\xBB\\xBF//' {DAEMON_JSON}, then run again")
        try:
            config = json.loads(state.content) if state.exists and state.content.strip() else {}
        except json.JSONDecodeError as exc:
            raise StepFailed(f"{DAEMON_JSON} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
                             "it was left untouched", fix=f"fix {DAEMON_JSON} by hand (or restore a backup), then "
                             "run again") from None
        if not isinstance(config, dict):
            raise StepFailed(f"{DAEMON_JSON} is not a JSON object; it was left untouched", fix=f"fix {DAEMON_JSON}")
        runtimes = config.get("runtimes", {})
        if runtimes is not None and not isinstance(runtimes, dict):
            raise StepFailed(f'{DAEMON_JSON}: "runtimes" is a JSON {kind_of(runtimes, json=True)}, Docker wants an '
                             "object; it was left untouched",
                             fix=f'make "runtimes" an object (or remove it) in {DAEMON_JSON}')
        merged = json.loads(json.dumps(config))
        runtimes = merged.get("runtimes") or {}
        nvidia = runtimes.get("nvidia") if isinstance(runtimes.get("nvidia"), dict) else {}
        nvidia = {**nvidia, "path": self.runtime_path}  # the user's runtimeArgs (or args) stay
        if "args" not in nvidia and "runtimeArgs" not in nvidia:
            nvidia["args"] = []  # as nvidia-ctk writes it
        merged["runtimes"] = {**runtimes, "nvidia": nvidia}
        if self.default_runtime:
            merged["default-runtime"] = "nvidia"
        if merged == config:
            return []
        text = json.dumps(merged, indent=_json_indent(state.content)) + "\n"
        return [write_action(DAEMON_JSON, state, text, reason="nvidia runtime missing from Docker's config")]

    def _containerd(self, ctx: StepContext, main: FileState, dropin: FileState, version: str,
                    loaded: Loaded) -> list[Action]:
        if not version.strip():
            raise StepFailed("containerd: yes, but containerd is not installed: a config.toml written now would "
                             "hold only the nvidia runtime, and containerd's package would keep it (no runc: the CRI "
                             "plugin fails)", fix="install containerd before this step (its package ships "
                             "config.toml), or use containerd: auto")
        from gpunode.steps.containerd_config import ConfigError, LayoutError, add_nvidia_runtime

        major = containerd_major(version)
        actions = []
        if dropin.exists and dropin.content.startswith(OLD_DROPIN_HEADER):
            # older gpunode releases wrote the runtime here; containerd 1.x let it replace the CRI section
            actions.append(Action(f"remove {CONTAINERD_DROPIN}", "written by an older gpunode: on containerd 1.x "
                                  "it replaced the whole CRI section (SystemdCgroup, sandbox_image, mirrors)",
                                  f"rm -f -- {q(CONTAINERD_DROPIN)}"))
        try:
            edit = add_nvidia_runtime(main.content if main.exists else "", major, self.runtime_path,
                                      self.default_runtime, loaded)
        except ConfigError as exc:
            where = f" (line {exc.line}, column {exc.column})" if exc.line else ""
            raise StepFailed(f"{CONTAINERD_CONFIG} is {exc}{where}; it was left untouched and containerd was not "
                             "restarted", fix=f"fix {CONTAINERD_CONFIG} by hand (or restore a backup; check it with "
                             "`containerd config dump`), then run again") from None
        except LayoutError as exc:
            raise StepFailed(f"{CONTAINERD_CONFIG} is valid, but {exc}; it was left untouched and containerd was not "
                             "restarted", fix=f"write the runtimes in {CONTAINERD_CONFIG} as section tables "
                             "([plugins.\"...\".containerd.runtimes.runc], as `containerd config default` does), "
                             "then run again; or add the nvidia runtime by hand") from None
        if edit.note:
            ctx.notes.append(edit.note)
        if edit.changes:
            # containerd itself must load the new file with the runtime in it; on containerd 1.x an imported file
            # that holds a CRI section replaces the main file's, and the runtime would silently not load.
            validate = 'containerd --config "$1" config dump | grep -q "runtimes\\.nvidia\\]"'
            write = write_action(CONTAINERD_CONFIG, main, edit.text, validate=validate, reason="; ".join(edit.changes))
            write.fix = ("if containerd did not load the runtime: an imported file (see `imports` in "
                         f"{CONTAINERD_CONFIG}) holds a CRI section and replaces the main file's on containerd 1.x; "
                         "add the nvidia runtime to that file, or move its settings into config.toml")
            actions.append(write)
        return actions

    def _cdi(self, ctk: str, present: str) -> list[Action]:
        """Toolkit 1.18+ keeps /var/run/cdi/nvidia.yaml current itself (nvidia-cdi-refresh); older ones need
        `nvidia-ctk cdi generate` into /etc/cdi."""
        if toolkit_version(ctk) >= fact_value(TOOLKIT, "cdi_refresh_since"):
            if "enabled" in present.split():
                return []
            return [Action("enable nvidia-cdi-refresh (the toolkit writes /var/run/cdi/nvidia.yaml)",
                           "cdi: true; toolkit 1.18+ generates and refreshes the CDI spec itself",
                           "systemctl enable --now nvidia-cdi-refresh.path && systemctl start nvidia-cdi-refresh",
                           fix="the driver must be loaded (reboot first if it was just installed)")]
        if CDI_STATIC in present.split():
            return []
        return [Action(f"generate the CDI spec {CDI_STATIC}", "cdi: true",
                       f"nvidia-ctk cdi generate --output={CDI_STATIC}",
                       fix="install the container toolkit; the driver must be loaded (reboot first if it was just "
                       "installed)")]


def _containerd_coming(ctx: StepContext) -> list[Action]:
    """Check mode: containerd is absent now, but an earlier step would install it (docker.io depends on it); the real
    run then finds it and edits its config.toml, so that is a change too, whose details are known only then."""
    coming = [p for p in ctx.state.installing if p in CONTAINERD_PROVIDERS]
    if not coming:
        return []
    return [Action(f"add the nvidia runtime to {CONTAINERD_CONFIG}",
                   f"would change (unknown until run): containerd is not installed yet, an earlier step installs "
                   f"{', '.join(coming)}; its config.toml is edited once it exists")]


def _json_indent(text: str) -> int | str:
    """The indentation a JSON file already uses (so a merge does not reformat every line); 4 for a new file."""
    for line in text.splitlines()[1:]:
        stripped = line.lstrip(" \t")
        if stripped and stripped != line:
            return line[: len(line) - len(stripped)] if "\t" in line[: len(line) - len(stripped)] \
                else len(line) - len(stripped)
    return 4



