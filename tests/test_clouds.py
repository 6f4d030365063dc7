"""Image builder plug-ins (gpunode/clouds/): found by module name, each one template, one source, its bases from the
distro adapters; a plug-in that breaks the contract fails loudly, and bad input is a usage error."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunode import clouds
from gpunode.distros import AWS_IMAGE_BASES, IMAGE_BASES
from gpunode.errors import UsageError
from gpunode.image import packer as packer_cli

REPO = Path(__file__).resolve().parents[1]


def test_every_module_is_a_builder_named_after_it() -> None:
    assert list(clouds.all_clouds()) == clouds.names() and {"aws", "qemu"} <= set(clouds.names())
    for name, cloud in clouds.all_clouds().items():
        assert cloud.name == name and cloud.summary and cloud.credentials_help, name
        assert cloud.plugin and cloud.plugin.source.startswith("github.com/"), name


@pytest.mark.parametrize("name", clouds.names())
def test_each_template_has_one_source_that_the_shared_build_block_runs(name: str) -> None:
    cloud = clouds.cloud(name)
    text = (REPO / "packer" / cloud.template).read_text()
    block = packer_cli.build_block(text)
    kind, source = packer_cli._SOURCE.findall(text)[0]
    assert f'sources = ["source.{kind}.{source}"]' in block and "@SOURCE@" not in block


@pytest.mark.parametrize("name", clouds.names())
def test_each_base_is_a_distro_adapters_image_base(name: str) -> None:
    cloud = clouds.cloud(name)
    assert cloud.bases, name
    assert set(cloud.bases) <= {*IMAGE_BASES, *AWS_IMAGE_BASES}, name
    for base, found in cloud.bases.items():  # an empty user: the builder makes its own (gcp)
        assert cloud.base(base) == found


def test_an_unknown_builder_or_base_names_the_ones_there_are() -> None:
    with pytest.raises(UsageError) as unknown:
        clouds.cloud("azure-stack")
    assert all(name in unknown.value.fix for name in clouds.names())
    with pytest.raises(UsageError, match="not available for qemu"):
        clouds.cloud("qemu").base("tencentos-3")


def test_the_base_help_names_every_builders_extra_bases() -> None:
    said = clouds.bases_help()
    for cloud in clouds.all_clouds().values():
        for base in cloud.bases:
            assert base in said, (cloud.name, base)


def test_a_module_without_its_cloud_fails_loudly(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "broken.py").write_text('"""A plug-in that forgot CLOUD."""\n')
    monkeypatch.setattr(clouds, "__path__", [*clouds.__path__, str(tmp_path)])
    clouds.all_clouds.cache_clear()
    try:
        assert "broken" in clouds.names()
        with pytest.raises(TypeError, match="broken.py must define CLOUD"):
            clouds.all_clouds()
    finally:
        monkeypatch.undo()
        clouds.all_clouds.cache_clear()
        import sys

        sys.modules.pop("gpunode.clouds.broken", None)


@pytest.mark.parametrize(("args", "option", "near"), [
    (("--builder", "gcp", "--packer-var", "project_id=p", "--packer-var", "acelerator_count=1"),
     "--packer-var acelerator_count", "did you mean accelerator_count?"),
    (("--builder", "qemu", "--base", "debian-12", "--source-image", "/etc/hostname", "--region", "eu-west-1"),
     "--region", "leave it out"),
    (("--builder", "qemu", "--base", "debian-12", "--source-image", "/etc/hostname", "--instance-type", "g5.xlarge"),
     "--instance-type", "leave it out"),
])
def test_a_setting_the_template_lacks_is_refused_not_dropped(args, option, near, tmp_path: Path) -> None:
    """Packer 1.6.6 only warns about a variable the template does not declare ("Undefined variable") and drops the
    value: a typo'd --packer-var, or --region on qemu, would build as if never given."""
    from tests.conftest import run_cli

    result = run_cli("build-image", "--playbook", "playbooks/base.yml", "--validate-only", *args,
                     env={"GPUNODE_BUILDS": str(tmp_path / "builds")})
    said = " ".join(result.output.split())
    assert result.code == 2 and f"error: {option}:" in said and near in said, result.output
    assert not (tmp_path / "builds").exists()


def test_a_wrong_template_value_is_named_as_the_setting_to_change(tmp_path: Path) -> None:
    from tests.conftest import run_cli
    from tests.image_support import require_packer

    require_packer()
    result = run_cli("build-image", "--builder", "gcp", "--playbook", "playbooks/base.yml", "--validate-only",
                     "--packer-var", "project_id=p", "--instance-type", "n1-standard-4", "--packer-var",
                     "accelerator_count=two", env={"GPUNODE_BUILDS": str(tmp_path / "builds")})
    assert result.code == 2 and "packer validate failed" in result.output, result.output
    said = " ".join(result.output.split())
    assert "fix: the value of accelerator_count is wrong" in said and "credentials" not in said


def test_the_base_help_says_which_builder_lacks_the_default(monkeypatch) -> None:
    from gpunode.distros import DEFAULT_BASE

    qemu = clouds.cloud("qemu")
    without = {name: base for name, base in qemu.bases.items() if name != DEFAULT_BASE}
    monkeypatch.setattr(type(qemu), "bases", property(lambda self: without))
    said = clouds.bases_help(["qemu", "gcp"])
    assert said.startswith(f"base image: {DEFAULT_BASE} (default)") and f"qemu has no {DEFAULT_BASE}" in said
    with pytest.raises(UsageError, match=r"\(the default --base\) is not available for qemu"):
        qemu.base(DEFAULT_BASE)
