"""What a provisioned instance will carry into its image: OS, kernels, driver, CUDA, container toolkit, GPUs."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from gpunode.connection import ConnectOptions, connect
from gpunode.errors import GpunodeError
from gpunode.facts import Facts, facts_subshell, parse_facts
from gpunode.inventory import Host
from gpunode.parsers.package_versions import cuda_version, driver_versions, toolkit_version
from gpunode.steps.image import validate_snippets
from gpunode.steps.probe import ProbeBatch

EXTRA_PACKAGES = (
    "{ dpkg-query -W -f='${Package}\\t${Version}\\n' 'cuda-*' 'nvidia-container-toolkit*' 2>/dev/null || "
    "rpm -qa --qf '%{NAME}\\t%{VERSION}-%{RELEASE}\\n' 'cuda-*' 'nvidia-container-toolkit*' 2>/dev/null; true; }"
)


@dataclass
class ImageInfo:
    os: str = ""
    os_id: str = ""
    kernel_running: str = ""
    kernel_boot: str = ""
    driver: str | None = None
    driver_consistent: bool = True
    cuda: str | None = None
    container_toolkit: str | None = None
    docker: str | None = None
    gpu_count: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


def image_info(facts: Facts, packages: dict[str, str], boot_kernel: str) -> ImageInfo:
    """Versions from facts plus the CUDA / container-toolkit package query."""
    all_packages = {**facts.installed_packages, **facts.nvidia.packages, **packages}
    versions = driver_versions(all_packages)
    driver = facts.nvidia.driver_version or (next(iter(versions)) if len(versions) == 1 else None)
    return ImageInfo(
        os=facts.os.pretty_name, os_id=f"{facts.os.id}-{facts.os.version_id}", kernel_running=facts.kernel.running,
        kernel_boot=boot_kernel or facts.kernel.running, driver=driver, driver_consistent=len(versions) <= 1,
        cuda=cuda_version(all_packages), container_toolkit=toolkit_version(all_packages),
        docker=facts.containers.docker_version, gpu_count=facts.gpu_count,
    )


def inspect_host(host: Host, options: ConnectOptions) -> ImageInfo:
    """One remote exec: facts, the extra packages, the kernel that will boot."""
    conn = connect(host, options)
    try:
        conn.open()
        batch = ProbeBatch([{"facts": facts_subshell(), "packages": EXTRA_PACKAGES,
                             **validate_snippets(("boot-kernel",))}])
        result = conn.run("bash -s", stdin=batch.script(), label="image inspection")
        if not result.ok:
            raise GpunodeError(f"inspecting the instance failed: {result.tail()}", host=host.name, step="inspect")
        (output,) = batch.split(result.stdout)
        packages = dict(line.split("\t", 1) for line in output["packages"].splitlines() if "\t" in line)
        boot = output["boot-kernel"].partition("\n")[0].strip()
        return image_info(parse_facts(output["facts"]), packages, boot)
    finally:
        conn.close()
        conn.transcript.close()

