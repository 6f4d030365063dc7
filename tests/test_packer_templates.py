"""The Packer templates and the packer CLI driver, with the real packer (Debian's 1.6.6 here), offline."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest

from gpunode import clouds
from gpunode.errors import GpunodeError, UsageError
from gpunode.image import packer as packer_cli
from gpunode.image.keys import generate_key
from gpunode.image.machine import Artifacts, parse_line
from tests.conftest import run_cli
from tests.image_support import AWS_ENV, require_packer

REPO = Path(__file__).resolve().parents[1]
# What each template needs to validate; credentials are dummies in the vendors' own variables (never in templates).
DUMMY_VARS = {
    "aws": {"build_dir": "/tmp/gpunode-build", "source_ami": "ami-12345678", "source_ami_name": "any-*",
            "source_ami_owners": ["123456789012"], "ssh_username": "admin"},
    "alicloud": {"build_dir": "/tmp/gpunode-build", "source_image": "ubuntu_22_04_x64_20G_alibase_20240220.vhd"},
    "tencent": {"build_dir": "/tmp/gpunode-build", "source_image": "img-12345678", "ssh_username": "root"},
    "qemu": {"build_dir": "/tmp/gpunode-build", "source_image": "/tmp/gpunode-base.qcow2", "ssh_username": "admin"},
    "gcp": {"build_dir": "/tmp/gpunode-build", "project_id": "my-project", "source_image_family": "debian-12",
            "source_image_project_id": ["debian-cloud"], "ssh_private_key_file": "/tmp/k", "ssh_keys": "gpunode:k"},
}
DUMMY_ENV = {"ALICLOUD_ACCESS_KEY": "dummy", "ALICLOUD_SECRET_KEY": "dummy", "TENCENTCLOUD_SECRET_ID": "dummy",
             "TENCENTCLOUD_SECRET_KEY": "dummy"}


@pytest.fixture(scope="module")
def packer() -> packer_cli.Packer:
    require_packer()
    return packer_cli.find_packer()


@pytest.mark.parametrize("builder", clouds.names())
def test_template_validates_offline(builder: str, packer: packer_cli.Packer, tmp_path: Path, monkeypatch) -> None:
    for key, value in DUMMY_ENV.items():
        monkeypatch.setenv(key, value)
    staged = packer_cli.stage(clouds.cloud(builder), packer, tmp_path / "packer")
    assert builder in DUMMY_VARS, f"add DUMMY_VARS[{builder!r}]: what its template needs to validate"
    variables = dict(DUMMY_VARS[builder])
    if "ssh_private_key_file" in packer_cli.declared_variables(clouds.cloud(builder)):  # some builders read it: a
        generate_key(tmp_path / "id_ed25519", "gpunode-build-test")                 # real one, made as builds do
        variables["ssh_private_key_file"] = str(tmp_path / "id_ed25519")
    var_file = packer_cli.write_var_file(variables, tmp_path / "vars.pkrvars.hcl")
    packer_cli.validate(packer, staged, var_file)  # raises with Packer's message when invalid


def test_a_missing_variable_is_refused_with_packers_message(packer: packer_cli.Packer, tmp_path: Path) -> None:
    staged = packer_cli.stage(clouds.cloud("aws"), packer, tmp_path / "packer")
    var_file = packer_cli.write_var_file({"source_ami": "ami-12345678"}, tmp_path / "v.pkrvars.hcl")
    with pytest.raises(UsageError, match="build_dir"):
        packer_cli.validate(packer, staged, var_file)


def test_templates_are_formatted(packer: packer_cli.Packer) -> None:
    result = subprocess.run([packer.path, "fmt", "-check", str(REPO / "packer")], capture_output=True, text=True)
    assert result.returncode == 0, f"run `packer fmt packer/`: {result.stdout}"


def test_templates_hold_no_credentials_and_call_gpunode() -> None:
    for cloud in clouds.all_clouds().values():
        name = cloud.template
        template = (REPO / "packer" / name).read_text()
        assert "\nbuild {" not in template, f"{name}: the build block is packer/build.pkr.hcl.in's, shared"
        text = template + packer_cli.build_block(template)
        assert not re.search(r"^\s*(access_key|secret_key|secret_id|password)\s*=", text, re.M), name
        assert "required_plugins" not in text, f"{name} must run on packer 1.6"
        for needed in ("image-provision", "build.Host", "build.Port", "build.User", "build.SSHPrivateKey",
                       "save_packer_key", 'post-processor "manifest"'):
            assert needed in text, f"{name} lacks {needed}"


def test_required_plugins_only_on_modern_packer(packer: packer_cli.Packer, tmp_path: Path) -> None:
    """1.6 rejects required_plugins, so it is staged only for 1.7+, and only the build's own plugin."""
    if not packer.modern:
        (tmp_path / "plugins").mkdir()
        (tmp_path / "plugins" / "p.pkr.hcl").write_text(packer_cli.plugins_hcl(clouds.cloud("aws")))
        result = subprocess.run([packer.path, "validate", str(tmp_path / "plugins")], capture_output=True, text=True)
        assert result.returncode != 0 and "required_plugins" in result.stdout + result.stderr
    old = packer_cli.stage(clouds.cloud("aws"), packer_cli.Packer(packer.path, (1, 6, 6)), tmp_path / "old")
    assert sorted(p.name for p in old.iterdir()) == ["aws.pkr.hcl", "build.pkr.hcl"]
    new = packer_cli.stage(clouds.cloud("tencent"), packer_cli.Packer(packer.path, (1, 11, 2)), tmp_path / "new")
    plugins = (new / "plugins.pkr.hcl").read_text()
    assert 'source  = "github.com/hashicorp/tencentcloud"' in plugins and "amazon" not in plugins
    assert 'sources = ["source.tencentcloud-cvm.gpu-node"]' in (new / "build.pkr.hcl").read_text()


def test_a_template_has_one_source_for_the_shared_build_block() -> None:
    with pytest.raises(GpunodeError, match="exactly one source block"):
        packer_cli.build_block('source "null" "a" {}\nsource "null" "b" {}\n')


def test_versions_are_read_from_packer_version() -> None:
    assert packer_cli.parse_version("Packer v1.6.6") == (1, 6, 6)
    assert packer_cli.parse_version("Packer v1.11.2\n\nYour version of Packer is out of date!") == (1, 11, 2)
    assert packer_cli.parse_version("1.9.4") == (1, 9, 4)
    assert packer_cli.Packer("p", (1, 7, 0)).modern and not packer_cli.Packer("p", (1, 6, 6)).modern


def test_machine_readable_lines_and_artifacts() -> None:
    """Lines as Packer 1.6.6 printed them in a real amazon-ebs build against moto."""
    lines = [
        "1795318801,,ui,say,==> amazon-ebs.aws: No volumes to clean up%!(PACKER_COMMA) skipping",
        "1795318801,amazon-ebs.aws,artifact-count,1",
        "1795318801,amazon-ebs.aws,artifact,0,builder-id,mitchellh.amazonebs",
        "1795318801,amazon-ebs.aws,artifact,0,id,us-east-1:ami-b73d13a7192156657",
        "1795318801,amazon-ebs.aws,artifact,0,string,AMIs were created:\\nus-east-1: ami-b73d13a7192156657\\n",
        "1795318801,qemu.x,artifact,0,file,0,output/disk.qcow2",
        "not machine readable",
    ]
    parsed = [parse_line(line) for line in lines]
    assert parsed[0].ui_text == "==> amazon-ebs.aws: No volumes to clean up, skipping"
    assert parsed[-1] is None
    artifacts = Artifacts()
    for line in filter(None, parsed):
        artifacts.add(line)
    assert artifacts.ids() == ["us-east-1:ami-b73d13a7192156657"]
    assert artifacts.files() == ["output/disk.qcow2"]
    assert artifacts.builds["amazon-ebs.aws"]["0"]["string"].endswith("ami-b73d13a7192156657\n")


NULL_TEMPLATE = """
variable "text" {
  type = string
}
variable "items" {
  type = list(string)
}
variable "labels" {
  type = map(string)
}
variable "script" {
  type = string
}
source "null" "t" {
  communicator = "none"
}
build {
  sources = ["source.null.t"]
  provisioner "shell-local" {
    inline = [var.script]
  }
  provisioner "shell-local" {
    inline = [
      "cat <<'EOF' > ${path.root}/out.json",
      jsonencode({ text = var.text, items = var.items, labels = var.labels }),
      "EOF",
    ]
  }
}
"""


def _null_build(packer: packer_cli.Packer, tmp_path: Path, script: str, **extra) -> tuple[packer_cli.PackerRun, list]:
    staged = tmp_path / "null"
    staged.mkdir()
    (staged / "t.pkr.hcl").write_text(NULL_TEMPLATE)
    variables = {"text": "plain", "items": [], "labels": {}, "script": script, **extra}
    var_file = packer_cli.write_var_file(variables, tmp_path / "v.pkrvars.hcl")
    seen: list[tuple[float, str]] = []
    run = packer_cli.build(packer, staged, var_file, lambda line: seen.append((time.monotonic(), line.ui_text or "")))
    return run, seen


def test_variables_survive_hcl_quoting(packer: packer_cli.Packer, tmp_path: Path) -> None:
    import json

    text = 'quotes " and \\ and ${not.interpolated} and %{ if x } and\nnew line'
    run, _ = _null_build(packer, tmp_path, "true", text=text, items=["a b", "c,d"], labels={"gpunode:driver": "535"})
    assert run.ok, run.errors
    out = json.loads((tmp_path / "null" / "out.json").read_text())
    assert out == {"text": text, "items": ["a b", "c,d"], "labels": {"gpunode:driver": "535"}}


def test_output_streams_while_packer_runs(packer: packer_cli.Packer, tmp_path: Path) -> None:
    run, seen = _null_build(packer, tmp_path, "echo first-line; sleep 2; echo second-line")
    assert run.ok
    first = next(t for t, text in seen if "first-line" in text)
    second = next(t for t, text in seen if "second-line" in text)
    assert second - first > 1.5  # delivered as it happened, not buffered until packer exited


def test_a_failed_build_is_an_exit_code_and_error_lines(packer: packer_cli.Packer, tmp_path: Path) -> None:
    run, _ = _null_build(packer, tmp_path, "echo broken >&2; exit 3")
    assert not run.ok and run.exit_code != 0
    assert any("non-zero exit status" in e for e in run.errors)


def test_validate_only_checks_the_spec_and_the_template(packer: packer_cli.Packer, tmp_path: Path,
                                                        monkeypatch) -> None:
    from gpunode.image.build import BuildRequest, _prepare, _template_vars

    monkeypatch.setenv("GPUNODE_BUILDS", str(tmp_path / "builds"))
    env = {**AWS_ENV, "GPUNODE_BUILDS": str(tmp_path / "builds")}
    result = run_cli("build-ami", "--validate-only", "--driver-branch", "550", "--var", "reboot=defer",
                     "--base", "ubuntu-24.04", env=env)
    assert result.code == 0, result.output
    assert "aws.pkr.hcl is valid" in result.output and "nothing was built" in result.output
    build = _prepare(BuildRequest(base="ubuntu-24.04", driver_branch=550, variables=["reboot=defer"]),
                     clouds.cloud("aws"))
    spec = json.loads((build.directory / "build.json").read_text())
    assert spec["variables"] == {"reboot": "defer", "driver_branch": 550}
    assert spec["playbook"].endswith("playbooks/gpu-node.yml")
    variables = _template_vars(build)
    assert variables["ssh_username"] == "ubuntu" and "ubuntu-noble-24.04" in variables["source_ami_name"]
    assert (build.directory / "id_ed25519").stat().st_mode & 0o777 == 0o600


NO_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_PROFILE": "",
                  "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent", "AWS_CONFIG_FILE": "/nonexistent",
                  "AWS_EC2_METADATA_DISABLED": "true", **dict.fromkeys(DUMMY_ENV, "")}
VALIDATE_ONLY = {
    "aws": ["build-ami", "--base", "al2023-ecs-gpu"],
    "alicloud": ["build-image", "--builder", "alicloud", "--base", "alinux-3", "--region", "cn-hangzhou",
                 "--source-image", "aliyun_3_x64_20G_alibase_20240819.vhd"],
    "tencent": ["build-image", "--builder", "tencent", "--region", "ap-shanghai", "--packer-var",
                "zone=ap-shanghai-2", "--source-image", "img-12345678"],
    "qemu": ["build-image", "--builder", "qemu", "--base", "debian-12", "--source-image", "BASE"],
    "gcp": ["build-image", "--builder", "gcp", "--base", "ubuntu-24.04", "--packer-var", "project_id=my-project"],
}


@pytest.mark.parametrize("builder", clouds.names())
def test_validate_only_needs_no_credentials_and_keeps_no_key(builder: str, packer: packer_cli.Packer,
                                                             tmp_path: Path) -> None:
    """Issue 26: alicloud/tencent validation demanded credentials (Packer's builders refuse to validate without),
    and every validation, failed or not, left a build folder with a fresh private key."""
    (tmp_path / "base.qcow2").write_bytes(b"")
    assert builder in VALIDATE_ONLY, f"add VALIDATE_ONLY[{builder!r}]: the command line of a --validate-only build"
    args = [a.replace("BASE", str(tmp_path / "base.qcow2")) for a in VALIDATE_ONLY[builder]]
    env = {**NO_CREDENTIALS, "GPUNODE_BUILDS": str(tmp_path / "builds"), "HOME": str(tmp_path)}
    result = run_cli(*args, "--validate-only", env=env)
    assert result.code == 0, result.output
    assert "nothing was built" in result.output
    assert not [p for p in (tmp_path / "builds").rglob("*")], "validate-only kept files (a private key among them)"
    failed = run_cli(*args, "--validate-only", "--packer-var", "save_packer_key=maybe", env=env)
    assert failed.code == 2 and "packer validate failed" in failed.output, failed.output
    assert not [p for p in (tmp_path / "builds").rglob("*")]


def test_bad_input_is_refused_before_anything_is_created(tmp_path: Path) -> None:
    env = {**AWS_ENV, "GPUNODE_BUILDS": str(tmp_path / "builds")}
    result = run_cli("build-ami", "--base", "centos-7", env=env)
    assert result.code == 2 and "unknown base 'centos-7' for AWS" in result.output
    result = run_cli("build-image", "--builder", "tencent", env=env)
    assert result.code == 2 and "add --source-image (img-xxxxxxxx)" in result.output
    result = run_cli("build-ami", "--validate-only", env={**env, "GPUNODE_PACKER": "no-such-packer"})
    assert result.code == 2 and "packer not found" in result.output and "apt-get install packer" in result.output
    result = run_cli("build-ami", "--playbook", "playbooks/missing.yml", env=env)
    assert result.code == 2
    assert not (tmp_path / "builds").exists()


def test_a_wrong_playbook_value_is_refused_before_a_build(tmp_path: Path) -> None:
    """Trial of issues 26-28: `provision --var kernel_policy=sometimes` is refused before any host is contacted, but
    `build-ami` (even --validate-only) and `user-data` accepted it: the build instance or the new node would fail."""
    env = {**NO_CREDENTIALS, "GPUNODE_BUILDS": str(tmp_path / "builds"), "HOME": str(tmp_path)}
    result = run_cli("build-ami", "--validate-only", "--var", "kernel_policy=sometimes", env=env)
    assert result.code == 2 and "kernel_policy" in result.output and "sometimes" in result.output, result.output
    assert "build-instance" in result.output and not (tmp_path / "builds").exists()
    data = run_cli("user-data", "--playbook", "gpu-node", "-e", "kernel_policy=sometimes", "--output",
                   str(tmp_path / "ud.sh"), env=env)
    assert data.code == 2 and "kernel_policy" in data.output and not (tmp_path / "ud.sh").exists(), data.output
    branch = run_cli("build-ami", "--validate-only", "--driver-branch", "55O", env=env)
    assert branch.code == 2 and "e.g. --driver-branch 550" in branch.output, branch.output
