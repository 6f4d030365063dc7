"""image_cleanup and image_validate on a real lab host: leftovers planted, cleaned, checked from inside."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunode.image.keys import generate_key
from tests.conftest import host_inventory, run_cli

pytestmark = pytest.mark.lab

# A small package named like a driver package, held as gpu-node.yml holds the real ones; it has no kernel module.
FAKE_DRIVER = (
    "mkdir -p /root/fake/DEBIAN && printf 'Package: nvidia-gpunode-fake\\nVersion: 535.309.01-1\\nArchitecture: all\\n"
    "Maintainer: gpunode tests <tests@gpunode.invalid>\\nDescription: held like a driver package\\n' "
    "> /root/fake/DEBIAN/control && dpkg-deb -b /root/fake /root/fake.deb >/dev/null && dpkg -i /root/fake.deb "
    ">/dev/null && apt-mark hold nvidia-gpunode-fake >/dev/null && rm -rf /root/fake /root/fake.deb"
)


def plant_leftovers(host, build_key: str) -> None:
    script = f"""set -e
echo '{build_key}' >> /home/gpunode/.ssh/authorized_keys
echo 'ls -la' > /root/.bash_history; echo 'x = 1' > /home/gpunode/.python_history
touch /tmp/leftover /var/tmp/leftover2
mkdir -p /var/tmp/cloud-init  # cloud-init's scratch dir: every boot makes it again
mkdir -p /var/lib/dhcp /var/lib/cloud/instances/i-0abc /etc/udev/rules.d
touch /var/lib/dhcp/dhclient.eth0.leases /var/log/cloud-init.log /etc/udev/rules.d/70-persistent-net.rules
apt-get -q -o DPkg::Lock::Timeout=300 update >/dev/null
{FAKE_DRIVER}
systemctl enable apt-daily.timer >/dev/null 2>&1
"""
    result = host.run_inside(script, timeout=300)
    assert result.returncode == 0, result.stderr


def inside(host, command: str) -> str:
    return host.run_inside(command).stdout.strip()


def test_cleanup_and_validation_on_a_real_host(lab, fresh_host, tmp_path: Path) -> None:
    build_key = generate_key(tmp_path / "build_key", "gpunode-build-labtest")
    plant_leftovers(fresh_host, build_key)
    inventory = host_inventory(lab, [fresh_host], tmp_path / "inv.yml")
    args = ["provision", "-i", str(inventory), "--playbook", "playbooks/image-finalize.yml", "--var",
            f"build_public_key={build_key}"]

    check = run_cli(*args, "--check")
    for category in ("pkg-cache", "machine-id", "ssh-host-keys", "cloud-init", "history", "tmp", "dhcp", "udev-net",
                     "auto-upgrades", "build-key"):
        assert f"[{category}]" in check.output, category
    assert inside(fresh_host, "cat /root/.bash_history") == "ls -la"  # check mode changed nothing
    assert "2 entries in /tmp and /var/tmp" in check.output  # the leftovers, not cloud-init's empty scratch dir

    result = run_cli(*args)
    # cleanup ran first, so validation finds no leftovers; it fails on the fake driver, which has no kernel module
    assert result.code == 1, result.output
    assert "no nvidia kernel module for" in result.output and "the kernel that will boot" in result.output
    assert "not cleaned" not in result.output

    assert inside(fresh_host, "test -f /etc/machine-id && wc -c < /etc/machine-id") == "0"
    assert inside(fresh_host, "ls /etc/ssh/ | grep -c ssh_host_ || true") == "0"
    assert inside(fresh_host, "systemctl is-enabled gpunode-ssh-host-keys.service") == "enabled"
    keys = inside(fresh_host, "cat /home/gpunode/.ssh/authorized_keys")
    assert "gpunode-build-labtest" not in keys and lab.key_path.with_suffix(".pub").read_text().split()[1] in keys
    gone = "/root/.bash_history /home/gpunode/.python_history /tmp/leftover /var/tmp/leftover2 " \
           "/var/lib/dhcp/dhclient.eth0.leases /var/lib/cloud/instances /var/log/cloud-init.log " \
           "/etc/udev/rules.d/70-persistent-net.rules"
    assert inside(fresh_host, f"for f in {gone}; do test -e $f && echo $f; done; true") == ""
    assert inside(fresh_host, "test -d /var/tmp/cloud-init && echo kept") == "kept"
    assert inside(fresh_host, "find /var/lib/apt/lists -maxdepth 1 -type f ! -name lock | wc -l") == "0"
    assert inside(fresh_host, "ls /var/cache/apt/*.bin 2>/dev/null | wc -l") == "0"
    assert inside(fresh_host, "systemctl is-enabled apt-daily.timer apt-daily-upgrade.timer || true") == \
        "disabled\ndisabled"
    assert 'Unattended-Upgrade "0"' in inside(fresh_host, "cat /etc/apt/apt.conf.d/20auto-upgrades")
    # the new machine boots with fresh SSH host keys
    assert inside(fresh_host, "systemctl start gpunode-ssh-host-keys.service && ls /etc/ssh | grep -c _key.pub") != "0"


# What the ECS-optimized AMI carries for AWS Batch, planted on a lab host: the agent's program, its enabled unit,
# its configuration (the content of each is gpunode's test stand-in; the names and places are the AMI's).
ECS_AGENT = """set -e
mkdir -p /usr/libexec /etc/ecs /var/lib/ecs/data
printf '#!/bin/sh\\nexec sleep infinity\\n' > /usr/libexec/amazon-ecs-init && chmod 755 /usr/libexec/amazon-ecs-init
printf '[Unit]\\nDescription=Amazon ECS agent (test stand-in)\\n[Service]\\n%s\\n[Install]\\n%s\\n' \\
    'ExecStart=/usr/libexec/amazon-ecs-init start' 'WantedBy=multi-user.target' > /etc/systemd/system/ecs.service
systemctl daemon-reload && systemctl enable ecs.service >/dev/null 2>&1
echo 'ECS_LOGLEVEL=info' > /etc/ecs/ecs.config
echo '{"Cluster":"build"}' > /var/lib/ecs/data/ecs_agent_data.json
"""


def test_ecs_agent_validation_for_aws_batch(lab, fresh_host, tmp_path: Path) -> None:
    inventory = host_inventory(lab, [fresh_host], tmp_path / "inv.yml")
    args = ["provision", "-i", str(inventory), "--playbook", "playbooks/image-finalize.yml",
            "--var", "cleanup_categories=[ecs-state]", "--var", "ecs_agent=true"]

    bare = run_cli(*args)  # a Debian host: no agent at all
    assert bare.code == 1, bare.output
    assert "the ECS agent (ecs.service) is not installed" in bare.output
    assert "/etc/ecs/ecs.config is missing" in bare.output
    assert run_cli(*args[:-2]).code == 0  # the same host is fine for an image that is not meant for Batch

    assert fresh_host.run_inside(ECS_AGENT).returncode == 0
    # an NVIDIA kernel module for the boot kernel: the image has a driver, so GPU support must be on
    kernel = inside(fresh_host, "uname -r")
    planted = fresh_host.run_inside(f"mkdir -p /lib/modules/{kernel}/updates/dkms && "
                                    f"touch /lib/modules/{kernel}/updates/dkms/nvidia.ko")
    assert planted.returncode == 0, planted.stderr
    # ecs_gpu_support (image-finalize, ecs_agent) enables GPU support where AWS's GPU AMI does; the user's file stays
    no_docker = run_cli(*args)
    assert no_docker.code == 1, no_docker.output
    assert inside(fresh_host, "cat /var/lib/ecs/ecs.config") == "ECS_ENABLE_GPU_SUPPORT=true"
    assert inside(fresh_host, "cat /etc/ecs/ecs.config") == "ECS_LOGLEVEL=info"
    assert "Batch GPU jobs would get no GPU" not in no_docker.output
    assert "Docker is not installed: the ECS agent runs every task's containers with it" in no_docker.output
    assert "ecs.service) is not installed" not in no_docker.output and "ecs.config is missing" not in no_docker.output
    # cleanup ran before validation: the agent state that would be baked in is gone
    assert inside(fresh_host, "ls -A /var/lib/ecs/data") == ""
    assert inside(fresh_host, "systemctl is-enabled ecs.service") == "enabled"  # cleaned, still enabled

    fresh_host.run_inside("echo 'ECS_ENABLE_GPU_SUPPORT=false' >> /etc/ecs/ecs.config")  # the user's file wins
    refused = run_cli(*args)
    assert refused.code == 1 and "/etc/ecs/ecs.config sets ECS_ENABLE_GPU_SUPPORT=false" in refused.output
    fresh_host.run_inside(f"rm -f /lib/modules/{kernel}/updates/dkms/nvidia.ko")


def test_the_build_key_user_data_lets_the_key_in(lab, fresh_host, tmp_path: Path) -> None:
    """alicloud/tencent builds: the user data cloud-init runs as root lets gpunode's build key in over real SSH."""
    import shlex

    import paramiko

    from gpunode.image.keys import key_user_data

    key_file = tmp_path / "build_key"
    public = generate_key(key_file, "gpunode-build-userdata")
    key = paramiko.Ed25519Key.from_private_key_file(str(key_file))

    def login(user: str) -> bool:
        client = paramiko.SSHClient()
        client.set_missing_host_key_policy(paramiko.AutoAddPolicy())  # a fresh lab host; not a trust decision here
        try:
            client.connect(fresh_host.address, username=user, pkey=key, allow_agent=False, look_for_keys=False,
                           timeout=20)
            _, stdout, _ = client.exec_command("id -un")
            return stdout.read().decode().strip() == user
        except paramiko.AuthenticationException:
            return False
        finally:
            client.close()

    assert not login("root")  # the key is new to the host
    for user in ("root", "gpunode"):
        script = key_user_data(user, public)
        result = fresh_host.run_inside(f"sh -c {shlex.quote(script)}")
        assert result.returncode == 0, result.stderr
        assert login(user)
    assert inside(fresh_host, "stat -c %U:%a /home/gpunode/.ssh/authorized_keys") == "gpunode:600"
    # and image_cleanup's build-key removes it again, as on every builder
    inventory = host_inventory(lab, [fresh_host], tmp_path / "inv.yml")
    result = run_cli("provision", "-i", str(inventory), "--playbook", "playbooks/image-finalize.yml", "--var",
                     "cleanup_categories=[build-key]", "--var", f"build_public_key={public}")
    assert result.code == 0, result.output
    assert not login("root") and not login("gpunode")


def fake_package(name: str, version: str) -> str:
    """Shell that installs an empty .deb named `name` at `version` (a name image inspection looks for)."""
    return (f"mkdir -p /root/fake/DEBIAN && printf 'Package: {name}\\nVersion: {version}\\nArchitecture: all\\n"
            "Maintainer: gpunode tests <tests@gpunode.invalid>\\nDescription: fake\\n' > /root/fake/DEBIAN/control && "
            "dpkg-deb -b /root/fake /root/fake.deb >/dev/null && dpkg -i /root/fake.deb >/dev/null && "
            "rm -rf /root/fake /root/fake.deb")


def test_inspection_reads_facts_packages_and_boot_kernel_from_one_exec(lab, fresh_host, tmp_path: Path) -> None:
    """image/inspect.py's one exec through the probe protocol: facts, the CUDA/toolkit packages, the boot kernel."""
    from gpunode.app.hosts import load_hosts
    from gpunode.connection import ConnectOptions, q
    from gpunode.image.inspect import inspect_host
    from gpunode.scripts import script_text

    planted = fresh_host.run_inside(f"{fake_package('cuda-toolkit-12-4', '12.4.1-1')} && "
                                    f"{fake_package('nvidia-container-toolkit', '1.17.8-1')}")
    assert planted.returncode == 0, planted.stderr
    _, (host,) = load_hosts([str(host_inventory(lab, [fresh_host], tmp_path / "inv.yml"))], None, None)
    info = inspect_host(host, ConnectOptions(log_dir=tmp_path))
    assert (info.cuda, info.container_toolkit) == ("12.4", "1.17.8")
    assert info.os_id == "debian-" + inside(fresh_host, ". /etc/os-release; echo $VERSION_ID")
    assert info.kernel_running == inside(fresh_host, "uname -r")
    boot = inside(fresh_host, f"bash -c {q(script_text('image_validate.sh'))} image-validate boot-kernel")
    assert boot and info.kernel_boot == boot
    assert info.driver is None and info.gpu_count == 0
    log = "\n".join(p.read_text() for p in tmp_path.rglob("*.log"))
    finished = [line for line in log.splitlines() if " $ " in line and " -> exit " in line]
    assert len(finished) == 1 and "image inspection" in finished[0], finished  # one remote exec
