"""Google Cloud images (gcp builder), checked offline against Packer 1.6.6's own googlecompute builder and the facts
of gpunode/clouds/gcp.py (GOOGLECOMPUTE: packer at 9b997f2 / v1.6.6, packer-plugin-googlecompute v1.2.0-v1.2.7,
Google's guest agent and GPU pages) and the adapters' public image families (guest-test-infra 562e5d6)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gpunode.clouds import cloud
from gpunode.clouds.gcp import GOOGLECOMPUTE, image_name, labels
from gpunode.errors import UsageError
from gpunode.image import build as build_mod
from gpunode.image import packer as packer_cli
from gpunode.image.machine import Artifacts
from gpunode.image.report import BuildReport
from gpunode.vendor_facts import value
from tests.conftest import run_cli
from tests.image_support import require_packer

NO_GOOGLE = {"GOOGLE_APPLICATION_CREDENTIALS": "/nonexistent", "CLOUDSDK_CONFIG": "/nonexistent"}
GCP = cloud("gcp")


def _request(tmp_path: Path, **fields) -> build_mod.BuildRequest:
    fields.setdefault("packer_vars", ["project_id=my-project"])
    return build_mod.BuildRequest(builder="gcp", playbook="playbooks/base.yml", build_root=str(tmp_path / "builds"),
                                  **fields)


def _staged(monkeypatch, request: build_mod.BuildRequest) -> tuple[str, str, str]:
    """The variables, the template that Packer 1.6.6 validated and the build key's public half (the folder is gone
    after --validate-only)."""
    seen: list[tuple[str, str, str]] = []
    real = packer_cli.validate

    def keep(packer, directory: Path, var_file: Path, *rest) -> str:
        seen.append((var_file.read_text(), (directory / GCP.template).read_text(),
                     (var_file.parent / "id_ed25519.pub").read_text()))
        return real(packer, directory, var_file, *rest)

    monkeypatch.setattr(packer_cli, "validate", keep)
    build_mod.build_image(request, GCP, out=lambda line: None)
    return seen[0]


def test_validate_only_needs_no_google_credentials(tmp_path: Path) -> None:
    require_packer()
    result = run_cli("build-image", "--builder", "gcp", "--playbook", "playbooks/base.yml", "--validate-only",
                     "--packer-var", "project_id=my-project",
                     env={"GPUNODE_BUILDS": str(tmp_path / "builds"), "HOME": str(tmp_path), **NO_GOOGLE})
    assert result.code == 0, result.output
    assert "gcp.pkr.hcl is valid" in result.output and "nothing was built" in result.output
    assert not list((tmp_path / "builds").rglob("*"))


def test_a_public_base_is_its_family_and_the_build_key_reaches_the_metadata(monkeypatch, tmp_path: Path) -> None:
    require_packer()
    staged, _, public = _staged(monkeypatch, _request(tmp_path, base="debian-12", validate_only=True))
    assert 'source_image_family = "debian-12"' in staged and 'source_image_project_id = ["debian-cloud"]' in staged
    user = re.search(r'^ssh_username = "(.*)"$', staged, re.M).group(1)
    keys = json.loads(re.search(r"^ssh_keys = (.*)$", staged, re.M).group(1))
    assert user == "gpunode" and keys.startswith(f"{user}:ssh-ed25519 ")  # USER:KEY, Google's ssh-keys form
    assert keys.split(":", 1)[1].split()[1] == public.split()[1]  # the build's own key
    name = re.search(r'^image_name = "(.*)"$', staged, re.M).group(1)
    assert re.match(value(GOOGLECOMPUTE, "image_name"), name), name


def test_an_n1_gpu_build_validates_and_the_builder_itself_needs_terminate(monkeypatch, tmp_path: Path) -> None:
    """Packer 1.6.6's Prepare refuses GPUs without on_host_maintenance TERMINATE (config.go 526-528): the template
    sets it, and without it the same staged build is refused by Packer with the builder's message."""
    require_packer()
    request = _request(tmp_path, base="ubuntu-22.04", instance_type="n1-standard-8", validate_only=True,
                       packer_vars=["project_id=my-project", "accelerator_count=1"])
    staged, template, _ = _staged(monkeypatch, request)
    assert "accelerator_count = 1" in staged and 'instance_type = "n1-standard-8"' in staged
    monkeypatch.undo()  # Packer's own validate again
    packer = packer_cli.find_packer()
    folder = tmp_path / "no-terminate"
    folder.mkdir()
    (folder / GCP.template).write_text(template.replace('on_host_maintenance     = "TERMINATE"\n', ""))
    (folder / "build.pkr.hcl").write_text(packer_cli.build_block(template))
    var_file = packer_cli.write_var_file({**_vars(staged), "build_dir": str(tmp_path)}, tmp_path / "v.pkrvars.hcl")
    with pytest.raises(UsageError, match="'on_host_maintenance' must be set to 'TERMINATE'"):
        packer_cli.validate(packer, folder, var_file)


def _vars(staged: str) -> dict:
    """The staged var file back as values (each line `key = <HCL literal>`; our literals are JSON-compatible)."""
    found = {}
    for line in staged.splitlines():
        key, _, text = line.partition(" = ")
        if text.startswith("{"):
            found[key] = json.loads("{" + ", ".join(f"{k}: {v}" for k, v in re.findall(r'("[^"]*") = ("[^"]*")', text))
                                    + "}")
        else:
            found[key] = json.loads(text)
    return found


@pytest.mark.parametrize(("args", "message"), [
    ((), "add --packer-var project_id=PROJECT"),
    (("--packer-var", "project_id=p", "--region", "us-central1"), "run in a zone, not a region"),
    (("--packer-var", "project_id=p", "--packer-var", "accelerator_count=1"), "attaches GPUs to N1 machine types"),
    (("--packer-var", "project_id=p", "--name", "GPU_node.1"), "not accepted by Compute Engine"),
    (("--packer-var", "project_id=p", "--base", "tencentos-3"), "base 'tencentos-3' is not available for gcp"),
])
def test_what_google_would_refuse_late_is_refused_first_with_exit_2(args, message, tmp_path: Path) -> None:
    result = run_cli("build-image", "--builder", "gcp", "--playbook", "playbooks/base.yml", "--validate-only", *args,
                     env={"GPUNODE_BUILDS": str(tmp_path / "builds")})
    assert result.code == 2, result.output
    assert message in " ".join(result.output.split())
    assert not (tmp_path / "builds").exists()


def test_default_names_and_labels_follow_compute_engines_rules() -> None:
    name = image_name("gpunode-a-very-long-playbook-name-here-and-more-ubuntu-22.04-20261129-013000-abcdef",
                      "20261129-013000-abcdef", False)
    assert len(name) <= 63 and name.endswith("-20261129-013000-abcdef") and re.match(
        value(GOOGLECOMPUTE, "image_name"), name)
    assert image_name("my-image-1", "x", True) == "my-image-1"
    key_rule, value_rule = value(GOOGLECOMPUTE, "label_rule")
    tags = {"Name": "gpunode-gpu-node-ubuntu-22.04", "gpunode:driver": "535.261.03",
            "gpunode:playbook-sha256": "a" * 64, "9lives": "x",
            "gpunode:base": "debian-12 (source AMI; provisioned: ubuntu-22.04, a stand-in)"}
    found = labels(tags)
    assert found["gpunode_driver"] == "535-261-03" and found["name"] == "gpunode-gpu-node-ubuntu-22-04"
    assert len(found) == len(tags)
    for key, text in found.items():
        assert re.match(key_rule, key) and re.match(value_rule, text), (key, text)


def test_a_build_records_the_image_by_name_with_its_labels(monkeypatch, tmp_path: Path) -> None:
    """The artifact id is the image's bare name (artifact.go 36-43); Packer 1.6 labels the image with what is known
    before the build, and image.json keeps every label."""
    require_packer()

    def fake_build(packer, staged, var_file, on_line, env=None):  # what Packer leaves after a good build
        BuildReport(host="h", ok=True, image={"driver": "550.163.01", "kernel_boot": "6.1.0-1"}).write(
            Path(staged).parent / "report.json")
        run = packer_cli.PackerRun(exit_code=0, artifacts=Artifacts())
        run.artifacts.builds["googlecompute.gpu-node"] = {"0": {"id": "gpunode-base-debian-12-x"}}
        return run

    monkeypatch.setattr(packer_cli, "build", fake_build)
    lines: list[str] = []
    result = build_mod.build_image(_request(tmp_path, base="debian-12"), GCP, out=lines.append)
    assert result.image_id == "gpunode-base-debian-12-x"
    record = json.loads((result.build_dir / "image.json").read_text())
    assert record["builder"] == "gcp" and record["tags"]["gpunode_driver"] == "550-163-01"
    assert "versions are in image.json" in lines[-1]


def test_a_region_given_as_the_zone_is_refused(tmp_path: Path) -> None:
    result = run_cli("build-image", "--builder", "gcp", "--playbook", "playbooks/base.yml", "--validate-only",
                     "--packer-var", "project_id=p", "--packer-var", "zone=us-central1",
                     env={"GPUNODE_BUILDS": str(tmp_path / "builds")})
    assert result.code == 2 and "is no Compute Engine zone" in result.output, result.output
    assert value(GOOGLECOMPUTE, "zone_region") == "zone[:-2]"
