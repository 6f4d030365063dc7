"""image_cleanup / image_validate planning, driver-version consistency and tags, without a host."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunode.errors import GpunodeError
from gpunode.facts import Facts
from gpunode.facts.model import DkmsEntry, NvidiaInfo, StorageInfo
from gpunode.image.keys import generate_key, public_key_line
from gpunode.image.provision import finalize_vars
from gpunode.image.report import BuildReport
from gpunode.image.tags import static_tags, version_tags
from gpunode.inventory import Host
from gpunode.parsers.package_versions import cuda_version, driver_versions, toolkit_version, upstream_driver_version
from gpunode.playbook import load_playbook
from gpunode.steps import StepContext, StepFailed, build_step
from gpunode.steps.image import ALL, key_blob, parse_leftovers
from gpunode.steps.probe import ProbeOutput

REPO = Path(__file__).resolve().parents[1]
KERNEL = "6.1.0-27-cloud-amd64"
# Debian 12 non-free as installed by gpu-node.yml: nvidia-persistenced really is on its own version there.
DEBIAN_DRIVER = {"nvidia-kernel-dkms": "535.309.01-0+deb12u1", "nvidia-smi": "535.309.01-0+deb12u1",
                 "libnvidia-ml1": "535.309.01-0+deb12u1", "nvidia-persistenced": "535.171.04-1~deb12u1",
                 "nvidia-kernel-common": "20220217+3~deb12u1", "nvidia-container-toolkit": "1.17.8-1"}


def context(facts: Facts, probe: dict[str, str], check: bool = False) -> StepContext:
    return StepContext(Host("h", "10.0.0.1"), facts, None, check, ProbeOutput(probe))  # type: ignore[arg-type]


def gpu_facts(packages: dict[str, str], dkms: tuple[DkmsEntry, ...] = (), free: int = 50 * 10**9) -> Facts:
    return Facts(nvidia=NvidiaInfo(packages=packages, dkms=dkms), storage=StorageInfo(free_bytes={"/": free}))


def validate_probe(kernel: str = KERNEL, dkms: str = "", modules: str = "", held: str = "",
                   leftovers: str = "") -> dict[str, str]:
    return {"leftovers": leftovers, "boot-kernel": f"{kernel}\n", "dkms": dkms, "modules": modules, "held": held}


def test_key_blob_and_leftover_parsing() -> None:
    assert key_blob("ssh-ed25519 AAAAC3Nza comment here") == "AAAAC3Nza"
    assert key_blob("AAAAB3Nza") == "AAAAB3Nza" and key_blob(None) == ""
    with pytest.raises(ValueError):
        key_blob("not a key")
    found = parse_leftovers("tmp\t3 entries in /tmp and /var/tmp\nbuild-key\t/root/.ssh/authorized_keys has it\n"
                            "noise\nbogus\tx\n")
    assert found == {"tmp": ["3 entries in /tmp and /var/tmp"], "build-key": ["/root/.ssh/authorized_keys has it"]}


def test_unknown_categories_are_refused_at_load_time() -> None:
    with pytest.raises(ValueError, match="unknown category bogus"):
        build_step("image_cleanup", {"categories": ["tmp", "bogus"]})


def test_cleanup_plans_one_action_with_the_build_key_last() -> None:
    step = build_step("image_cleanup", {"authorized_key": "ssh-ed25519 AAAAC3Nzablob build"})
    probe = "build-key\t/root/.ssh/authorized_keys has the build key\ntmp\t2 entries\nmachine-id\tnot empty\n"
    (action,) = step.plan(context(Facts(), {"leftovers": probe}))
    assert action.summary == "clean the image: machine-id, tmp, build-key"
    assert "image-cleanup apply machine-id,tmp,build-key AAAAC3Nzablob" in action.command
    assert "- [tmp] 2 entries" in action.diff
    assert step.plan(context(Facts(), {"leftovers": ""})) == []  # clean already: converged


def test_driver_versions_ignore_separately_released_tools() -> None:
    assert upstream_driver_version("535.309.01-0+deb12u1") == "535.309.01"
    assert upstream_driver_version("3:550.54.15-1.el9") == "550.54.15"
    assert upstream_driver_version("1.17.8-1") is None
    assert driver_versions(DEBIAN_DRIVER) == {"535.309.01": ["libnvidia-ml1", "nvidia-kernel-dkms", "nvidia-smi"]}
    mixed = driver_versions({**DEBIAN_DRIVER, "libnvidia-ml1": "535.216.01-1~deb12u1"})
    assert sorted(mixed) == ["535.216.01", "535.309.01"]
    assert cuda_version({"cuda-toolkit-12-4": "12.4.1-1", "cuda-cudart-12-2": "12.2.140-1"}) == "12.4"
    assert toolkit_version(DEBIAN_DRIVER) == "1.17.8"


def test_validate_passes_a_consistent_driver_built_for_the_boot_kernel() -> None:
    facts = gpu_facts(DEBIAN_DRIVER, (DkmsEntry("nvidia-current", "535.309.01", KERNEL, "x86_64", "installed"),))
    ctx = context(facts, validate_probe(dkms=f"nvidia-current/535.309.01, {KERNEL}, x86_64: installed\n",
                                        held="nvidia-kernel-dkms\n"))
    assert build_step("image_validate", {}).plan(ctx) == []
    assert "NVIDIA driver packages all on 535.309.01" in ctx.notes
    assert f"nvidia modules built for the boot kernel {KERNEL}" in ctx.notes


def test_validate_names_every_problem() -> None:
    facts = gpu_facts({**DEBIAN_DRIVER, "libnvidia-ml1": "535.216.01-1"}, free=10**9,
                      dkms=(DkmsEntry("nvidia-current", "535.309.01", "6.1.0-26-cloud-amd64", "x86_64", "installed"),))
    probe = validate_probe(dkms="nvidia-current/535.309.01: added\n",
                           leftovers="ssh-host-keys\t/etc/ssh/ssh_host_ed25519_key\n")
    with pytest.raises(StepFailed) as failed:
        build_step("image_validate", {"min_free_gb": 5}).plan(context(facts, probe))
    text = failed.value.cause
    assert "not cleaned (ssh-host-keys): /etc/ssh/ssh_host_ed25519_key" in text
    assert f"nvidia-current not built for {KERNEL}, the kernel that will boot" in text
    assert "more than one driver version (535.216.01: libnvidia-ml1; 535.309.01:" in text
    assert "only 1.0 GB free on /" in text


def test_validate_in_check_mode_does_not_hold_planned_cleanup_against_the_image() -> None:
    ctx = context(gpu_facts({}), validate_probe(leftovers="tmp\t3 entries\n"), check=True)
    assert build_step("image_validate", {}).plan(ctx) == []
    assert "no NVIDIA driver in this image" in ctx.notes
    with pytest.raises(StepFailed, match="no NVIDIA driver installed"):
        build_step("image_validate", {"require_driver": True}).plan(context(gpu_facts({}), validate_probe()))


def test_finalize_playbook_and_its_variables(tmp_path: Path) -> None:
    book = load_playbook(REPO / "playbooks" / "image-finalize.yml")
    assert [s.kind for s in book.steps] == ["ecs_gpu_support", "accept_at_boot", "image_cleanup", "image_validate",
                                              "command"]  # qemu off
    assert book.vars["power_off"] is False and finalize_vars(None, None, 2, False, power_off=True)["power_off"]
    line = generate_key(tmp_path / "k", "gpunode-build-x")
    assert public_key_line(tmp_path / "k") == line.rsplit(" ", 1)[0]
    assert finalize_vars(line, None, 2, False)["cleanup_categories"] == ALL
    assert "build-key" not in finalize_vars(None, None, 2, False)["cleanup_categories"]
    assert (tmp_path / "k").stat().st_mode & 0o777 == 0o600


def test_tags_from_the_build_report() -> None:
    report = BuildReport(ok=True, image={"driver": "535.309.01", "cuda_driver": "12.2", "container_toolkit": "1.17.8",
                                         "kernel_boot": KERNEL, "os_id": "debian-12"},
                         verify={"summary": "healthy: 1x NVIDIA A10G, driver 535.309.01, CUDA 12.2" + "!" * 300})
    tags = version_tags(report)
    assert tags["gpunode:driver"] == "535.309.01" and tags["gpunode:cuda"] == "12.2 (driver)"
    assert tags["gpunode:container-toolkit"] == "1.17.8" and tags["gpunode:docker"] == "none"
    assert len(tags["gpunode:verify"]) == 255
    static = static_tags("n", "b1", "ubuntu-22.04", "playbooks/gpu-node.yml", "ab" * 32, 550)
    assert static["gpunode:playbook"] == "gpu-node.yml" and static["gpunode:driver-branch"] == "550"


def test_a_failed_report_names_the_step() -> None:
    report = BuildReport(host="ubuntu@10.0.0.5:22", phase="provision", failed_step="NVIDIA driver",
                         error="DKMS build failed", fix="read make.log")
    error = report.failure()
    assert isinstance(error, GpunodeError) and error.step == "NVIDIA driver"
    assert "failed at step 'NVIDIA driver' (provision) on the build instance ubuntu@10.0.0.5:22" in error.cause
    assert "no image was made" in error.fix


def test_the_build_host_uses_packers_key_when_gpunode_made_none(tmp_path: Path) -> None:
    from gpunode.image.provision import build_host
    from gpunode.image.spec import BuildSpec

    spec = BuildSpec(playbook="p.yml", build_dir=str(tmp_path))
    with pytest.raises(GpunodeError, match="no SSH key for the build instance"):
        build_host(spec, "10.0.0.5", 22, "ubuntu")
    generate_key(tmp_path / "packer_key", "packer")
    host = build_host(spec, "10.0.0.5", 2222, "ubuntu")
    assert host.key_file == str(tmp_path / "packer_key") and host.become and host.port == 2222
    assert host.known_hosts == str(tmp_path / "known_hosts")
    assert not build_host(BuildSpec("p.yml", str(tmp_path), key_file="/k"), "h", 22, "root").become
