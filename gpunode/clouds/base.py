"""What an image builder plug-in is: one cloud (or qemu) as a Packer template plus the few decisions that differ.

A plug-in is a module of `gpunode/clouds/` that defines `CLOUD`, an instance of a `Cloud` subclass; nothing else is
edited to add one (see docs/writing-clouds.md). Module level stays light (the `--base` help reads the tables at
start-up): SDKs and `gpunode.image` are imported inside the methods that use them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpunode.distros.image_base import CloudBase as Base
from gpunode.errors import UsageError

if TYPE_CHECKING:
    from gpunode.image.build import BuildRequest, BuildResult, _Build
    from gpunode.image.packer import PackerRun
    from gpunode.playbook import Playbook


@dataclass(frozen=True)
class Plugin:
    """The Packer 1.7+ plugin a template needs (Packer 1.6.6 has every builder built in)."""

    name: str      # the local name in required_plugins
    source: str    # github.com/hashicorp/...
    version: str   # one minor series whose first and last releases' arguments tests/data/packer_builder_args.json holds


class Cloud:
    """Defaults fit a cloud that needs --source-image, tags nothing after Packer and whose artifact id is the image."""

    name: str = ""                       # --builder
    template: str = ""                   # a file of packer/
    plugin: Plugin | None = None
    credentials: tuple[str, ...] = ()    # environment variables `packer validate` wants set (placeholders there)
    credentials_help: str = ""           # where the build's credentials come from, for messages
    summary: str = ""                    # one line for help and docs
    image_id_example: str = "the base image's id"
    power_off: bool = False              # gpunode powers the build VM off itself (qemu: no cloud API to stop it)

    @property
    def bases(self) -> Mapping[str, Base]:
        """The `--base` names this builder offers: the distro adapters' image bases that name it (`clouds`)."""
        from gpunode.distros import IMAGE_BASES

        return {name: base.clouds[self.name] for name, base in IMAGE_BASES.items() if self.name in base.clouds}

    # -- before anything is created --------------------------------------------------------------------------------
    def base(self, base: str) -> Base:
        """The base on this cloud; a usage error naming the ones it has."""
        if base not in self.bases:
            from gpunode.distros import DEFAULT_BASE

            default = " (the default --base)" if base == DEFAULT_BASE else ""
            raise UsageError(f"base {base!r}{default} is not available for {self.name}", fix=f"give --base, one of: "
                             f"{', '.join(self.bases)}")
        return self.bases[base]

    def check_request(self, request: BuildRequest, variables: dict[str, Any]) -> None:
        """Refuse what would fail later (the base, a missing base image, template variables the plugin would fail
        on, a missing SDK); `variables` are --region and --packer-var. May resolve request.source_image."""
        self.base(request.base)
        if not request.source_image:
            raise UsageError(f"{self.name} builds need the base image",
                             fix=f"add --source-image ({self.base(request.base).example or self.image_id_example})")

    def default_region(self) -> str | None:
        """The region without --region: None leaves it to the template's default (or the vendor's environment)."""
        return None

    def found_by(self, base: str) -> str:
        """How the base image is found without --source-image (for docs and help)."""
        return ""

    def default_playbook(self, request: BuildRequest) -> str:
        return "gpu-node"

    def check_playbook(self, request: BuildRequest, book: Playbook) -> None:
        """A base whose image must not get what the playbook installs is refused here."""

    def needs_ecs_agent(self, request: BuildRequest) -> bool:
        return False

    # -- the template ----------------------------------------------------------------------------------------------
    def image_name(self, name: str, build_id: str, given: bool) -> str:
        """The image name as the cloud accepts it (also the Name tag and the record's)."""
        return name

    def template_vars(self, build: _Build) -> dict[str, Any]:
        """This cloud's template variables (the shared ones and --packer-var are added by the caller)."""
        raise NotImplementedError

    def resolve(self, request: BuildRequest, variables: dict[str, Any]) -> dict[str, Any]:
        """Lookups a real build needs once the variables are known (never for --validate-only)."""
        return {}

    # -- the build -------------------------------------------------------------------------------------------------
    def run(self, build: _Build, staged: Any, variables: dict[str, Any], var_file: Any, result: BuildResult,
            out: Callable[[str], None]) -> BuildResult:
        """Packer, then the image's tags and record (AWS overrides it: key pair, SSM base, Batch outputs)."""
        from gpunode.image.build import finish, run_packer

        run = run_packer(build, staged, var_file, out)
        return finish(build, run, result, out)

    def artifact(self, build: _Build, run: PackerRun) -> str:
        """The image id from Packer's artifact (or manifest)."""
        from gpunode.image.build import first_artifact_id

        return first_artifact_id(build, run)

    def cloud_tags(self, tags: dict[str, str]) -> dict[str, str]:
        """The tags as the cloud holds them (what image.json records)."""
        return tags

    def tag_image(self, build: _Build, result: BuildResult) -> str:
        """Tags put on the image after Packer, if any; says where the tags are."""
        return f"{self.name} images carry the static tags Packer set"
