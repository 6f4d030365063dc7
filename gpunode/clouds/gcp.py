"""Google Cloud images (googlecompute): GPU node images for GKE node pools, Batch and plain Compute Engine VMs.

The build instance is a G2 machine (its NVIDIA L4 is part of the machine type) unless the user picks an N1 type and
`accelerator_count`; either way it stops for host maintenance, as GPU instances must. gpunode's own build key reaches
the instance through its `ssh-keys` metadata, where Google's guest agent makes the user (a google-sudoers member).
Credentials: Application Default Credentials, read by the builder only when the build runs (`--validate-only` needs
none). The bases' public image families are the distro adapters' (`ImageBase.clouds["gcp"]`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from gpunode.clouds.base import Cloud, Plugin
from gpunode.errors import UsageError
from gpunode.vendor_facts import Fact, Source, fact_table, value

if TYPE_CHECKING:
    from gpunode.image.build import BuildRequest, _Build

_PACKER = "hashicorp/packer"
_P166 = "9b997f28d5e3a187f2141d7c06082bbf0732954b"  # v1.6.6, googlecompute built in
_PLUGIN = "hashicorp/packer-plugin-googlecompute"
_G127 = "1fbf6a099c72b18b0a9360362514b42d88c358d1"  # v1.2.7, the last release of the pinned series
_AGENT = "GoogleCloudPlatform/guest-agent"
_AGENT_HEAD = "df9d20376449c38ed4ebb1a93c0b029f09171b71"

GOOGLECOMPUTE = fact_table("googlecompute", {
    "gpu_maintenance": Fact("TERMINATE", Source(_PACKER, "builder/googlecompute/config.go", _P166, "526-528"),
                            note="Prepare refuses accelerator_count > 0 unless on_host_maintenance is TERMINATE "
                            "(the default is MIGRATE; GPU VMs cannot live-migrate: "
                            "https://cloud.google.com/compute/docs/gpus/gpu-host-maintenance)"),
    "accelerator_type": Fact("projects/{project}/zones/{zone}/acceleratorTypes/{accelerator}",
                             Source(_PACKER, "builder/googlecompute/config.go", _P166, "41-45"),
                             note="the full accelerator type URL the builder attaches on N1 machine types"),
    "gpu_machine_series": Fact("n1-", Source(url="https://cloud.google.com/compute/docs/gpus/about-gpus"),
                               note="GPUs are attached to N1 VMs; accelerator-optimized types (G2: NVIDIA L4) come "
                               "with theirs; GPUs can't be used with other machine series"),
    "image_name": Fact(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?\Z",
                       Source(_PACKER, "builder/googlecompute/config.go", _P166, "24"),
                       note="validImageName (at most 63 characters, config.go 388-406), the Compute API's own rule"),
    "label_rule": Fact((r"^[a-z][a-z0-9_-]{0,62}\Z", r"^[a-z0-9_-]{0,63}\Z"),
                       Source(url="https://cloud.google.com/resource-manager/docs/labels-overview"),
                       note="keys start with a lowercase letter, keys and values hold lowercase letters, digits, _ "
                       "and -, at most 63 characters (Packer 1.6.6 checks none of it: the API would refuse at the "
                       "end of a build)"),
    "key_file_no_metadata": Fact("ssh-keys", Source(_PACKER, "builder/googlecompute/step_create_instance.go", _P166,
                                                    "40-51"),
                                 note="with ssh_private_key_file the builder puts no key in the instance's metadata: "
                                 "gpunode puts its own there (the plugin: step_create_instance.go "
                                 f"{_G127[:7]}:46-54)"),
    "metadata_user_sudo": Fact("google-sudoers", Source(_AGENT, "README.md", _AGENT_HEAD, "66-77"),
                               note="the guest agent makes each ssh-keys user and adds it to google-sudoers, which "
                               "non_windows_accounts.go:402 grants NOPASSWD sudo"),
    "zone_region": Fact("zone[:-2]", Source(_PACKER, "builder/googlecompute/config.go", _P166, "491-499"),
                        note="the builder takes the region as the zone without its last two characters: a zone is "
                        "<region>-<letter> (us-central1-a)"),
    "artifact_id": Fact("{image_name}", Source(_PACKER, "builder/googlecompute/artifact.go", _P166, "36-43"),
                        note="the artifact id is the image's bare name (the plugin's too)"),
})
LOGIN_USER = "gpunode"  # any name: the guest agent makes it from the ssh-keys metadata
DEFAULT_ZONE, DEFAULT_MACHINE = "us-central1-a", "g2-standard-4"  # packer/gcp.pkr.hcl's defaults (one L4)


class Gcp(Cloud):
    name = "gcp"
    template = "gcp.pkr.hcl"
    plugin = Plugin("googlecompute", "github.com/hashicorp/googlecompute", ">= 1.2.0, < 1.3.0")
    credentials_help = "Application Default Credentials: GOOGLE_APPLICATION_CREDENTIALS or `gcloud auth " \
        "application-default login`"
    summary = "a Google Cloud image (GKE node pools, Compute Engine)"
    image_id_example = "projects/PROJECT/global/images/NAME, or leave it out for the base's public family"

    def found_by(self, base: str) -> str:
        project, _, family = self.base(base).lookup.partition("/")
        return f"the newest image of family {family} in project {project}" if family else ""

    def check_request(self, request: BuildRequest, variables: dict[str, Any]) -> None:
        self.base(request.base)
        if not variables.get("project_id"):
            raise UsageError("gcp builds need your project", fix="add --packer-var project_id=PROJECT (the build "
                             "instance runs there and the image is kept there)")
        if request.region:
            raise UsageError("gcp builds run in a zone, not a region", source="--region",
                             fix=f"leave --region out and add --packer-var zone=ZONE (default {DEFAULT_ZONE})")
        check_accelerators(request.instance_type or "", variables)
        zone = str(variables.get("zone") or DEFAULT_ZONE)
        if not re.fullmatch(r"[a-z]+(?:-[a-z]+)*\d+-[a-z]", zone):
            raise UsageError(f"zone {zone!r} is no Compute Engine zone (<region>-<letter>: the builder takes the "
                             "region as the zone without its last two characters)", source="--packer-var zone",
                             fix=f"e.g. --packer-var zone={DEFAULT_ZONE}")
        if not request.source_image and not self.base(request.base).lookup:
            super().check_request(request, variables)

    def image_name(self, name: str, build_id: str, given: bool) -> str:
        return image_name(name, build_id, given)

    def template_vars(self, build: _Build) -> dict[str, Any]:
        request, base = build.request, self.base(build.request.base)
        project, _, family, user = *base.lookup.partition("/"), base.user or LOGIN_USER
        variables: dict[str, Any] = {
            "image_name": build.name, "tags": self.cloud_tags(build.static_tags()), "ssh_username": user,
            "ssh_private_key_file": build.key_file, "ssh_keys": f"{user}:{build.public_key}",
            "source_image": request.source_image or ""}
        if not request.source_image:
            variables.update(source_image_family=family, source_image_project_id=[project])
        return variables

    def cloud_tags(self, tags: dict[str, str]) -> dict[str, str]:
        return labels(tags)

    def tag_image(self, build: _Build, result: Any) -> str:
        return "gcp images carry the static labels Packer set; the versions are in image.json only"


def check_accelerators(instance_type: str, variables: dict[str, Any]) -> None:
    """GPUs attach to N1 machine types only; the builder would fail only once it creates the instance."""
    count = str(variables.get("accelerator_count") or "0")
    series = value(GOOGLECOMPUTE, "gpu_machine_series")
    machine = instance_type or str(variables.get("instance_type") or DEFAULT_MACHINE)
    if count not in ("", "0") and not machine.startswith(series):
        raise UsageError(f"accelerator_count={count} on {machine}: Compute Engine attaches GPUs to N1 machine types "
                         "only (accelerator-optimized types such as g2-standard-4 come with theirs)",
                         fix="leave accelerator_count out for a G2/A2/A3 type, or give --instance-type n1-standard-8")


def image_name(name: str, build_id: str, given: bool) -> str:
    """The image name Compute Engine accepts: lowercase letters, digits and -, at most 63 (a given name is refused
    rather than changed)."""
    from gpunode.image.names import cloud_image_name

    return cloud_image_name("gcp", name, build_id, given, 63, accepted=re.compile(value(GOOGLECOMPUTE, "image_name")),
                            unsafe=r"[^a-z0-9-]", lower=True,
                            fix="use at most {limit} lowercase letters, digits and -, starting with a letter and not "
                            "ending with -", by="Compute Engine")


def labels(tags: dict[str, str]) -> dict[str, str]:
    """gpunode's tags as Compute Engine labels: lowercase; in keys other characters become _, in values -; keys
    start with a letter; at most 63 characters each."""
    found = {}
    for key, text in tags.items():
        label = re.sub(r"[^a-z0-9_-]", "_", key.lower())[:63]
        if not label[:1].isalpha():
            label = ("k" + label)[:63]
        found[label] = re.sub(r"[^a-z0-9_-]", "-", text.lower())[:63]
    return found


CLOUD = Gcp()
