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
from typing import Any

from gpunode.errors import GpunodeError, UsageError
from gpunode.image.machine import Artifacts, MachineLine, parse_line
from gpunode.playbook.builtin import PACKER_DIR

TEMPLATES_DIR = PACKER_DIR  # packer/ in the repo, shipped in the wheel as gpunode/_packer
TEMPLATES = {"aws": "aws.pkr.hcl", "alicloud": "alicloud.pkr.hcl", "tencent": "tencent.pkr.hcl", "qemu": "qemu.pkr.hcl"}
# Packer 1.7+ needs these plugins (packer/plugins.pkr.hcl lists them all for `packer init`).
# Each range is one minor series whose first and last releases' argument lists were read from the plugin's source
# (tests/data/packer_builder_args.json); a template argument missing from any of them fails a test.
PLUGINS = {
    "aws": ("amazon", "github.com/hashicorp/amazon", ">= 1.8.0, < 1.9.0"),
    "alicloud": ("alicloud", "github.com/hashicorp/alicloud", ">= 1.1.0, < 1.1.3"),  # 1.1.3: RunInstances + EIP
    "tencent": ("tencentcloud", "github.com/hashicorp/tencentcloud", ">= 1.2.0, < 1.3.0"),
    "qemu": ("qemu", "github.com/hashicorp/qemu", ">= 1.1.0, < 1.2.0"),
}
MODERN_ONLY = "#gpunode-1.7+ "  # template lines for Packer 1.7+ plugins only, uncommented when staged there
INSTALL_FIX = ("install Packer: `apt-get install packer` (Debian's 1.6.6 has every builder built in and works offline) "
               "or HashiCorp's Packer 1.9+ and then `packer init packer/plugins.pkr.hcl`")


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


def plugins_hcl(builder: str) -> str:
    """A `packer { required_plugins }` block for one builder (staged only for Packer 1.7+)."""
    name, source, version = PLUGINS[builder]
    return (f'packer {{\n  required_plugins {{\n    {name} = {{\n      source  = "{source}"\n'
            f'      version = "{version}"\n    }}\n  }}\n}}\n')


def stage(builder: str, packer: Packer, directory: Path) -> Path:
    """Copy the builder's template (and, for Packer 1.7+, its required_plugins) into its own folder."""
    if builder not in TEMPLATES:
        raise UsageError(f"unknown builder {builder!r}", fix=f"use one of: {', '.join(TEMPLATES)}")
    directory.mkdir(parents=True, exist_ok=True)
    (directory / TEMPLATES[builder]).write_text(template_text(builder, packer.modern))
    if packer.modern:
        (directory / "plugins.pkr.hcl").write_text(plugins_hcl(builder))
    return directory


def template_text(builder: str, modern: bool) -> str:
    """The template as staged: on Packer 1.7+ the plugin-only lines (MODERN_ONLY) become arguments."""
    text = (TEMPLATES_DIR / TEMPLATES[builder]).read_text()
    if not modern:
        return text
    return re.sub(rf"^(\s*){re.escape(MODERN_ONLY)}", r"\1", text, flags=re.M)


def ensure_plugins(builder: str, packer: Packer, directory: Path, log: Callable[[str], None] = print) -> None:
    """On Packer 1.7+, install the builder's plugin (`packer init`) or say exactly what is missing."""
    if not packer.modern:
        return
    name, source, version = PLUGINS[builder]
    result = subprocess.run([packer.path, "init", str(directory)], capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        raise UsageError(
            f"Packer {packer.version_text} needs the {name} plugin ({source} {version}) and could not install it: "
            f"{(result.stderr or result.stdout).strip().splitlines()[-1:] or ['packer init failed']}",
            fix=f"with network access run `packer init packer/plugins.pkr.hcl` (or `packer plugins install {source}`); "
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


# Packer's alicloud and tencentcloud builders refuse `packer validate` without credentials, though validating calls no
# cloud: placeholders stand in for the missing ones there (only there: `packer build` gets the real environment).
CREDENTIAL_VARS = ("ALICLOUD_ACCESS_KEY", "ALICLOUD_SECRET_KEY", "TENCENTCLOUD_SECRET_ID", "TENCENTCLOUD_SECRET_KEY")


def validate(packer: Packer, directory: Path, var_file: Path) -> str:
    """`packer validate` (offline, no credentials needed); raises UsageError with Packer's message when the template
    is wrong."""
    env = {**os.environ, **{k: "gpunode-validate-placeholder" for k in CREDENTIAL_VARS if not os.environ.get(k)}}
    result = subprocess.run([packer.path, "validate", f"-var-file={var_file}", str(directory)], capture_output=True,
                            text=True, timeout=300, cwd=directory, env=env)
    if result.returncode != 0:
        raise UsageError(f"packer validate failed:\n{(result.stdout + result.stderr).strip()}",
                         fix="fix the variable or template it names; credentials come from the vendor's environment "
                         "(AWS_PROFILE or AWS_ACCESS_KEY_ID..., ALICLOUD_ACCESS_KEY/ALICLOUD_SECRET_KEY, "
                         "TENCENTCLOUD_SECRET_ID/TENCENTCLOUD_SECRET_KEY)")
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
