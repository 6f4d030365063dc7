"""Driving the packer CLI: find it, tell 1.6 (built-in builders) from 1.7+ (plugins), stage a template, run it
with its output streamed line by line and `-machine-readable` parsed.

Why not the packer-py package: 0.3.0 (2019) buffers all output until packer exits and raises nothing when a
build fails; a bake takes many minutes and its failure must stop everything, so we run the CLI ourselves.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from gpunode.errors import GpunodeError, UsageError
from gpunode.image.machine import Artifacts, MachineLine, parse_line
from gpunode.playbook.builtin import PACKER_DIR


class PackerPlugin(Protocol):
    """A Packer 1.7+ plugin: its local name, source address and version range."""

    @property
    def name(self) -> str: ...
    @property
    def source(self) -> str: ...
    @property
    def version(self) -> str: ...


class Template(Protocol):
    """What Packer is run with for one builder (a cloud plug-in, gpunode/clouds/)."""

    @property
    def template(self) -> str: ...          # a file of packer/
    @property
    def plugin(self) -> PackerPlugin | None: ...  # staged for Packer 1.7+
    @property
    def credentials(self) -> tuple[str, ...]: ...  # placeholders for `packer validate` when unset
    @property
    def credentials_help(self) -> str: ...


TEMPLATES_DIR = PACKER_DIR  # packer/ in the repo, shipped in the wheel as gpunode/_packer
# What every template shares (gpunode's variables, the build block that hands the instance to `gpunode
# image-provision`, the manifest), staged beside the cloud's template with its source put in.
SHARED_BUILD = "build.pkr.hcl.in"
SHARED_VARIABLES = ("build_dir", "save_packer_key", "gpunode_python")  # gpunode's own, set for every build
_SOURCE = re.compile(r'^source\s+"([^"]+)"\s+"([^"]+)"', re.M)
MODERN_ONLY = "#gpunode-1.7+ "  # template lines for Packer 1.7+ plugins only, uncommented when staged there
INSTALL_FIX = ("install Packer: `apt-get install packer` (Debian's 1.6.6 has every builder built in and works offline) "
               "or HashiCorp's Packer 1.9+ (gpunode runs `packer init` for the build's plugin)")


@dataclass(frozen=True)
class Packer:
    """The packer binary and its version."""

    path: str
    version: tuple[int, int, int]

    @property
    def modern(self) -> bool:
        """1.7+: builders are plugins declared in `required_plugins` (which 1.6 rejects)."""
        return self.version >= (1, 7, 0)

    @property
    def version_text(self) -> str:
        return ".".join(map(str, self.version))


def parse_version(text: str) -> tuple[int, int, int] | None:
    """`Packer v1.6.6` / `1.9.4` (first line of `packer version`) -> (1, 6, 6)."""
    match = re.search(r"v?(\d+)\.(\d+)\.(\d+)", text)
    return (int(match.group(1)), int(match.group(2)), int(match.group(3))) if match else None


def find_packer(binary: str | None = None) -> Packer:
    """The packer on PATH (or GPUNODE_PACKER); a UsageError that says how to install it when there is none."""
    name = binary or os.environ.get("GPUNODE_PACKER") or "packer"
    path = shutil.which(name)
    if not path:
        raise UsageError(f"packer not found ({name})", fix=INSTALL_FIX)
    out = subprocess.run([path, "version"], capture_output=True, text=True, timeout=60)
    version = parse_version(out.stdout.splitlines()[0] if out.stdout else "")
    if version is None:
        raise UsageError(f"cannot tell the version of {path}: {out.stdout.strip() or out.stderr.strip()}",
                         fix=INSTALL_FIX)
    return Packer(path, version)


def plugins_hcl(cloud: Template) -> str:
    """A `packer { required_plugins }` block for one builder (staged only for Packer 1.7+)."""
    if cloud.plugin is None:
        return ""
    plugin = cloud.plugin
    return (f'packer {{\n  required_plugins {{\n    {plugin.name} = {{\n      source  = "{plugin.source}"\n'
            f'      version = "{plugin.version}"\n    }}\n  }}\n}}\n')


def stage(cloud: Template, packer: Packer, directory: Path) -> Path:
    """Copy the cloud's template, the shared build block (and, for Packer 1.7+, its required_plugins) into a folder
    of their own."""
    directory.mkdir(parents=True, exist_ok=True)
    text = template_text(cloud, packer.modern)
    (directory / cloud.template).write_text(text)
    (directory / "build.pkr.hcl").write_text(build_block(text))
    if packer.modern and cloud.plugin:
        (directory / "plugins.pkr.hcl").write_text(plugins_hcl(cloud))
    return directory


def build_block(template: str) -> str:
    """The shared build block for the one `source "TYPE" "NAME"` of a template."""
    sources = _SOURCE.findall(template)
    if len(sources) != 1:
        raise GpunodeError(f"a gpunode template declares exactly one source block, not {len(sources)}",
                           fix="keep one `source \"TYPE\" \"NAME\" {...}` in the template (packer/)")
    kind, name = sources[0]
    return (TEMPLATES_DIR / SHARED_BUILD).read_text().replace("@SOURCE@", f"source.{kind}.{name}")


_VARIABLE = re.compile(r'^variable\s+"(\w+)"', re.M)


def declared_variables(cloud: Template) -> list[str]:
    """The variables a build of this template may set: the template's and the shared build block's."""
    text = (TEMPLATES_DIR / cloud.template).read_text() + (TEMPLATES_DIR / SHARED_BUILD).read_text()
    return _VARIABLE.findall(text)


def check_variables(cloud: Template, name: str, given: dict[str, object]) -> None:
    """Refuse a variable the template does not declare (Packer only warns, and the value is lost): --region and
    --instance-type become `region` and `instance_type`, --packer-var KEY=VALUE its key."""
    import difflib

    declared = declared_variables(cloud)
    options = {"region": "--region", "instance_type": "--instance-type"}
    for key, value in given.items():
        if value in (None, "") or key in declared:
            continue
        option = options.get(key, f"--packer-var {key}")
        near = difflib.get_close_matches(key, declared, n=1)
        raise UsageError(f"{name} builds have no such setting ({cloud.template} declares no variable {key!r})",
                         source=option,
                         fix=(f"did you mean {near[0]}? " if near else "") + f"leave it out, or use one of: "
                         f"{', '.join(v for v in declared if v not in SHARED_VARIABLES)}")


def template_text(cloud: Template, modern: bool) -> str:
    """The template as staged: on Packer 1.7+ the plugin-only lines (MODERN_ONLY) become arguments."""
    text = (TEMPLATES_DIR / cloud.template).read_text()
    if not modern:
        return text
    return re.sub(rf"^(\s*){re.escape(MODERN_ONLY)}", r"\1", text, flags=re.M)


def ensure_plugins(cloud: Template, packer: Packer, directory: Path, log: Callable[[str], None] = print) -> None:
    """On Packer 1.7+, install the builder's plugin (`packer init`) or say exactly what is missing."""
    if not packer.modern or cloud.plugin is None:
        return
    plugin = cloud.plugin
    result = subprocess.run([packer.path, "init", str(directory)], capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        said = ((result.stderr or result.stdout).strip().splitlines() or ["packer init failed"])[-1]
        raise UsageError(
            f"Packer {packer.version_text} needs the {plugin.name} plugin ({plugin.source} {plugin.version}) and "
            f"could not install it: {said}",
            fix=f"with network access run `packer plugins install {plugin.source}` (a version in {plugin.version}); "
            "offline, Debian's packer 1.6.6 has the builder built in",
        )
    if result.stdout.strip():
        log(result.stdout.strip())


def hcl_value(value: Any) -> str:
    """A Python value as an HCL2 literal (for var files)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(hcl_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{hcl_value(str(k))} = {hcl_value(v)}" for k, v in value.items()) + " }"
    text = json.dumps(str(value))
    return text.replace("${", "$${").replace("%{", "%%{")


def write_var_file(variables: dict[str, Any], path: Path) -> Path:
    path.write_text("".join(f"{key} = {hcl_value(value)}\n" for key, value in variables.items()))
    return path


@dataclass
class PackerRun:
    """What a `packer build` produced."""

    exit_code: int
    artifacts: Artifacts = field(default_factory=Artifacts)
    errors: list[str] = field(default_factory=list)
    interrupted: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.interrupted


def validate(packer: Packer, directory: Path, var_file: Path, cloud: Template | None = None) -> str:
    """`packer validate` (offline, no credentials needed: some builders refuse to validate without them, though
    validating calls no cloud, so placeholders stand in for the cloud's missing ones, only there); raises UsageError
    with Packer's message when the template is wrong."""
    wanted = cloud.credentials if cloud else ()
    env = {**os.environ, **{k: "gpunode-validate-placeholder" for k in wanted if not os.environ.get(k)}}
    result = subprocess.run([packer.path, "validate", f"-var-file={var_file}", str(directory)], capture_output=True,
                            text=True, timeout=300, cwd=directory, env=env)
    if result.returncode != 0:
        said = (result.stdout + result.stderr).strip()
        fix = "fix the variable or template it names"
        line = re.search(rf"{re.escape(var_file.name)} line (\d+)", said)
        lines = var_file.read_text().splitlines() if line else []
        if line and 0 < int(line.group(1)) <= len(lines):  # the var file is gpunode's: name the setting instead
            key = lines[int(line.group(1)) - 1].split(" = ", 1)[0]
            fix = f"the value of {key} is wrong: give it as the template's variable wants (--packer-var {key}=...)"
        if cloud and re.search(r"credential|secret|access.?key|key_file|token", said, re.I):
            fix += f"; credentials come from the environment ({cloud.credentials_help})"
        raise UsageError(f"packer validate failed:\n{said}", fix=fix)
    return result.stdout.strip()


def build(packer: Packer, directory: Path, var_file: Path, on_line: Callable[[MachineLine], None],
          env: dict[str, str] | None = None) -> PackerRun:
    """`packer build -machine-readable`, each line handed to `on_line` as it arrives.

    On Ctrl-C Packer (same process group) gets the interrupt too and cleans up (terminates the instance, deletes
    temporary key pairs and security groups); we keep reading until it has, then report the interruption.
    """
    cmd = [packer.path, "build", "-machine-readable", f"-var-file={var_file}", str(directory)]
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                                cwd=directory, env={**os.environ, **(env or {}), "CHECKPOINT_DISABLE": "1"})
    except OSError as exc:
        raise GpunodeError(f"cannot run {packer.path}: {exc}", fix=INSTALL_FIX) from None
    run = PackerRun(exit_code=-1)
    assert proc.stdout is not None
    while True:
        try:
            for raw in proc.stdout:
                line = parse_line(raw)
                if line is None:
                    if raw.strip():
                        on_line(MachineLine(0, "", "ui", ("message", raw.rstrip("\n"))))
                    continue
                run.artifacts.add(line)
                if line.is_error and line.ui_text:
                    run.errors.append(line.ui_text)
                on_line(line)
            break
        except KeyboardInterrupt:
            run.interrupted = True  # keep draining: Packer is cleaning up
    run.exit_code = proc.wait()
    return run


def manifest_artifact_ids(path: Path) -> list[str]:
    """Artifact ids of the last run in a manifest post-processor file (fallback for the machine-readable rows)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    last = data.get("last_run_uuid")
    return [b["artifact_id"] for b in data.get("builds", [])
            if b.get("packer_run_uuid") == last and b.get("artifact_id")]
