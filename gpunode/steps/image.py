"""Image steps: `image_cleanup` (what must not be captured) and `image_validate` (is this image fit to capture)."""

from __future__ import annotations

from dataclasses import dataclass

from gpunode.connection import q
from gpunode.facts import Facts
from gpunode.parsers.dkms import parse_dkms
from gpunode.parsers.package_versions import driver_versions
from gpunode.scripts import script_text
from gpunode.steps.base import Action, Step, StepContext, StepFailed, arg, register
from gpunode.steps.ecs_config import INSTANCE_CONFIG, KEY, RUNTIME, RUNTIME_KEY, USER_CONFIG, VALUE, config_value
from gpunode.steps.probe import ProbeOutput, Snippets

CATEGORIES = {  # category -> what it is, for reasons (scripts/image_cleanup.sh says what exactly goes)
    "pkg-cache": "package caches",
    "machine-id": "machine id",
    "ssh-host-keys": "SSH host keys",
    "cloud-init": "cloud-init state and logs",
    "history": "shell history",
    "tmp": "temporary files",
    "dhcp": "DHCP leases",
    "udev-net": "udev net rules",
    "auto-upgrades": "unattended upgrades while NVIDIA packages are held",
    "ecs-state": "ECS agent state (registration, checkpoints)",
    "build-key": "build key in authorized_keys",  # last: nobody logs in with it afterwards
}
ALL = list(CATEGORIES)
VALIDATE_SECTIONS = ("boot-kernel", "dkms", "modules", "held", "ecs")


def key_blob(authorized_key: str | None) -> str:
    """The base64 part of a public key line (`ssh-ed25519 AAAA... comment` -> `AAAA...`)."""
    parts = (authorized_key or "").split()
    if not parts:
        return ""
    blob = parts[1] if len(parts) > 1 and parts[0].startswith(("ssh-", "ecdsa-", "sk-")) else parts[0]
    if not blob.startswith("AAAA"):
        raise ValueError(f"authorized_key must be an OpenSSH public key, got {authorized_key!r}")
    return blob


def cleanup_command(mode: str, categories: list[str], blob: str) -> str:
    return f"bash -c {q(script_text('image_cleanup.sh'))} image-cleanup {mode} {q(','.join(categories))} {q(blob)}"


def validate_snippets(sections: tuple[str, ...] = VALIDATE_SECTIONS) -> Snippets:
    """scripts/image_validate.sh once per section it prints (boot-kernel, dkms, modules, held, ecs)."""
    return {name: f"bash -c {q(script_text('image_validate.sh'))} image-validate {name}" for name in sections}


def parse_leftovers(output: str) -> dict[str, list[str]]:
    """probe output (`CATEGORY<TAB>what` lines) -> what is left, per category."""
    found: dict[str, list[str]] = {}
    for line in output.splitlines():
        category, sep, what = line.partition("\t")
        if sep and category in CATEGORIES:
            found.setdefault(category, []).append(what)
    return found


def _check_categories(categories: list[str], where: str) -> None:
    unknown = [c for c in categories if c not in CATEGORIES]
    if unknown:
        raise ValueError(f"{where}: unknown categor{'ies' if len(unknown) > 1 else 'y'} {', '.join(unknown)}; "
                         f"known: {', '.join(ALL)}")


@register
@dataclass
class ImageCleanupStep(Step):
    """Remove what must not be baked into an image; `authorized_key` is the build's public key."""

    kind = "image_cleanup"
    categories: list[str] = arg(factory=lambda: list(ALL), doc="what to remove (default: every category)")
    authorized_key: str | None = arg(None, "the build's public key: its authorized_keys lines are removed last")

    def __post_init__(self) -> None:
        _check_categories(self.categories, "image_cleanup.categories")
        self.blob = key_blob(self.authorized_key)

    def probe(self, facts: Facts) -> Snippets:
        return {"leftovers": cleanup_command("probe", self.categories, self.blob)}

    def plan(self, ctx: StepContext) -> list[Action]:
        leftovers = parse_leftovers(ctx.probe["leftovers"])
        if not leftovers:
            return []
        todo = [c for c in ALL if c in leftovers]  # canonical order: the build key goes last
        reason = "; ".join(f"{CATEGORIES[c]}: {len(leftovers[c])}" for c in todo)
        listing = "".join(f"- [{c}] {what}\n" for c in todo for what in leftovers[c])
        return [Action(f"clean the image: {', '.join(todo)}", reason, cleanup_command("apply", todo, self.blob),
                       diff=f"--- would be removed or reset\n{listing}", timeout=900,
                       fix="read the output above; image_cleanup is safe to run again")]


@register
@dataclass
class ImageValidateStep(Step):
    """Before capture: cleaned files absent, DKMS built for the kernel that will boot, one driver version, free disk."""

    kind = "image_validate"
    cleaned: list[str] = arg(factory=lambda: list(ALL), doc="the cleanup categories that must have nothing left")
    authorized_key: str | None = arg(None, "the build's public key, which must be gone from authorized_keys")
    min_free_gb: float = arg(2.0, "free disk on / the image must keep (GB)")
    require_driver: bool = arg(False, "an NVIDIA driver must be installed")
    ecs_agent: bool = arg(False, "AWS Batch: the ECS agent enabled, GPU support on when there is a driver")

    def __post_init__(self) -> None:
        _check_categories(self.cleaned, "image_validate.cleaned")
        self.blob = key_blob(self.authorized_key)

    def probe(self, facts: Facts) -> Snippets:
        sections = VALIDATE_SECTIONS if self.ecs_agent else VALIDATE_SECTIONS[:-1]
        return {"leftovers": cleanup_command("probe", self.cleaned, self.blob), **validate_snippets(sections)}

    def plan(self, ctx: StepContext) -> list[Action]:
        sections = ctx.probe
        problems: list[str] = []
        leftovers = parse_leftovers(sections["leftovers"])
        if ctx.check and leftovers:  # image_cleanup only planned its work: nothing to hold against the image yet
            ctx.notes.append(f"check mode: cleanup leftovers not validated ({', '.join(leftovers)})")
        else:
            for category, items in leftovers.items():
                problems += [f"not cleaned ({category}): {what}" for what in items[:5]]
        boot_kernel = sections["boot-kernel"].strip() or ctx.facts.kernel.running
        problems += self._driver_problems(ctx, boot_kernel, sections)
        if self.ecs_agent:
            problems += ecs_problems(sections["ecs"], self._has_driver(ctx, sections), ctx.notes)
        free = ctx.facts.storage.free_bytes.get("/")
        if free is not None and free < self.min_free_gb * 1e9:
            problems.append(f"only {free / 1e9:.1f} GB free on / (at least {self.min_free_gb:g} GB wanted)")
        elif free is not None:
            ctx.notes.append(f"{free / 1e9:.1f} GB free on /")
        if problems:
            raise StepFailed("the image is not fit to capture:\n" + "\n".join(f"    - {p}" for p in problems),
                             fix="run image_cleanup for leftovers; build DKMS for the boot kernel (headers for it "
                             "installed, `dkms autoinstall -k KERNEL`); hold one driver version; grow the root disk; "
                             "for AWS Batch, start from --base al2023-ecs (or install and enable the ECS agent), run "
                             "the ecs_gpu_support step (image-finalize does for Batch builds), give Docker the nvidia "
                             "runtime (gpu-node.yml's container_toolkit and container_runtime steps)")
        return []

    @staticmethod
    def _has_driver(ctx: StepContext, sections: ProbeOutput) -> bool:
        return bool(driver_versions(ctx.facts.nvidia.packages) or ctx.facts.nvidia.dkms
                    or sections["modules"].split())

    def _driver_problems(self, ctx: StepContext, kernel: str, sections: ProbeOutput) -> list[str]:
        facts = ctx.facts
        versions = driver_versions(facts.nvidia.packages)
        registered = [e for e in facts.nvidia.dkms if e.module.startswith("nvidia")]
        modules = sections["modules"].split()
        if not versions and not registered and not modules:
            ctx.notes.append("no NVIDIA driver in this image")
            return ["no NVIDIA driver installed (require_driver: true)"] if self.require_driver else []
        problems = []
        if len(versions) > 1:
            listing = "; ".join(f"{v}: {', '.join(names)}" for v, names in versions.items())
            problems.append(f"NVIDIA packages on more than one driver version ({listing}): "
                            "'Driver/library version mismatch' after boot")
        elif versions:
            ctx.notes.append(f"NVIDIA driver packages all on {next(iter(versions))}")
        held = sections["held"].split()
        if versions and not any(name.startswith(("nvidia", "libnvidia", "cuda-drivers")) for name in held):
            ctx.notes.append("warning: no NVIDIA package is held; an unattended upgrade can cause a driver/library "
                             "version mismatch")
        built = {e.module for e in parse_dkms(sections["dkms"]) if e.kernel == kernel
                 and e.status.startswith("installed")}
        missing = sorted({e.module for e in registered} - built)
        if missing:
            problems.append(f"DKMS module(s) {', '.join(missing)} not built for {kernel}, the kernel that will boot")
        elif not registered and not modules:
            problems.append(f"no nvidia kernel module for {kernel}, the kernel that will boot")
        else:
            ctx.notes.append(f"nvidia modules built for the boot kernel {kernel}")
        return problems


def ecs_problems(evidence: str, has_driver: bool, notes: list[str]) -> list[str]:
    """What AWS Batch needs of an image, from image_validate.sh's `ecs` section.

    Batch starts jobs through the ECS agent: its unit enabled (and its program there), its configuration present
    (/etc/ecs/ecs.config, or the AMI's /var/lib/ecs/ecs.config), no agent state baked in; with an NVIDIA driver also
    ECS_ENABLE_GPU_SUPPORT=true as ecs-init reads the two files (the user's over the image's), else GPU jobs never
    get a GPU, and a Docker runtime of the name the agent gives every GPU container (ECS_NVIDIA_RUNTIME, default
    `nvidia`: aws/amazon-ecs-agent agent/api/task/task.go), else Docker refuses to create them.
    """
    facts: dict[str, list[str]] = {}
    for line in evidence.splitlines():
        if line.strip():
            key, _, rest = line.partition(" ")
            facts.setdefault(key, []).append(rest)
    problems = []
    enabled = (facts.get("enabled") or ["missing"])[0]
    if enabled not in ("enabled", "enabled-runtime", "static", "alias"):
        problems.append(f"the ECS agent (ecs.service) is {'not installed' if enabled == 'missing' else enabled}: "
                        "AWS Batch instances of this image would never join the compute environment")
    for program in facts.get("program", []):
        path, _, ok = program.rpartition(" ")
        if ok != "yes":
            problems.append(f"ecs.service starts {path}, which is not an executable file")
    if (facts.get("config") or ["no"])[0] != "yes":
        problems.append("/etc/ecs/ecs.config is missing (the ECS agent's configuration; /var/lib/ecs/ecs.config "
                        "neither)")
    settings = _ecs_settings(facts.get("conf", []))
    if has_driver:
        problems += _ecs_gpu_problems(settings, facts)
    for path in facts.get("state", []):
        problems.append(f"ECS agent state {path} would be baked in (image_cleanup's ecs-state removes it)")
    if not problems:
        gpu = f", GPU support on, Docker runtime {settings.get(RUNTIME_KEY, RUNTIME)}" if has_driver else ""
        notes.append(f"ECS agent enabled, its configuration present{gpu}")
    return problems


def _ecs_settings(lines: list[str]) -> dict[str, str]:
    """ECS_* settings as ecs-init merges them: the image's /var/lib/ecs/ecs.config, then the user's file over it."""
    merged: dict[str, str] = {}
    for path in (INSTANCE_CONFIG, USER_CONFIG):
        text = "\n".join(line.partition("\t")[2] for line in lines if line.partition("\t")[0] == path)
        for key in (KEY, RUNTIME_KEY):
            value = config_value(text, key)
            if value is not None:
                merged[key] = value
    return merged


def _ecs_gpu_problems(settings: dict[str, str], facts: dict[str, list[str]]) -> list[str]:
    problems = []
    if settings.get(KEY) != VALUE:
        problems.append(f"the image has an NVIDIA driver but neither {USER_CONFIG} nor {INSTANCE_CONFIG} sets "
                        f"{KEY}={VALUE}: Batch GPU jobs would get no GPU")
    runtime = settings.get(RUNTIME_KEY) or RUNTIME
    runtimes = (facts.get("runtimes") or [""])[0].split()
    docker = (facts.get("docker") or [""])[0]
    if docker == "missing":
        problems.append("Docker is not installed: the ECS agent runs every task's containers with it")
    elif docker == "down" or "runtimes" not in facts:
        problems.append(f"`docker info` failed (is Docker running?): cannot tell whether Docker has the runtime "
                        f"{runtime!r} the ECS agent gives every GPU container")
    elif runtime not in runtimes:
        problems.append(f"Docker has no runtime named {runtime!r} (it has: {', '.join(runtimes) or 'none'}): the "
                        "ECS agent sets it for every GPU container, so every Batch GPU job would fail to start")
    return problems
