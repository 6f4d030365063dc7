"""Shared by the image tests: a local moto_server (the sanctioned EC2 stand-in), packer's presence, fake creds."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

REQUIRE_LAB = os.environ.get("GPUNODE_REQUIRE_LAB") == "1"
# Dummy credentials: moto accepts anything; nothing here may reach a real cloud.
AWS_ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true", "CHECKPOINT_DISABLE": "1"}


# Provisioning with a reboot in the middle: each side of it leaves the boot id it saw.
REBOOT_PLAYBOOK = """name: reboots
steps:
  - name: before
    command: {cmd: "cat /proc/sys/kernel/random/boot_id > /root/boot-before", creates: /root/boot-before}
  - name: reboot in the middle
    reboot: {if_required: false, reason: "a new kernel would boot here"}
  - name: after
    command: {cmd: "cat /proc/sys/kernel/random/boot_id > /root/boot-after", creates: /root/boot-after}
"""


def require(condition: bool, why: str) -> None:
    """Skip when a tool is missing, but fail in CI (GPUNODE_REQUIRE_LAB=1), where dev/setup installs it."""
    if not condition:
        (pytest.fail if REQUIRE_LAB else pytest.skip)(why)


def require_packer() -> str:
    path = shutil.which("packer")
    require(path is not None, "packer is missing (apt-get install packer; dev/setup installs it)")
    return str(path)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def moto_server(env: dict[str, str] | None = None) -> Iterator[str]:
    """A moto_server on a free loopback port for one test (`env`: e.g. MOTO_AMIS_PATH); yields its endpoint URL."""
    require(importlib.util.find_spec("moto") is not None and importlib.util.find_spec("flask") is not None,
            "moto[server] is missing (pip install 'gpunode[test]')")
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, **(env or {})})
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("moto_server did not start")
            time.sleep(0.1)
        yield endpoint
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def ec2_client(endpoint: str):
    import boto3

    return boto3.client("ec2", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing",
                        aws_secret_access_key="testing")


def live_instances(ec2) -> list[str]:
    found = ec2.describe_instances(Filters=[{"Name": "instance-state-name",
                                             "Values": ["pending", "running", "stopping", "stopped"]}])
    return [i["InstanceId"] for r in found["Reservations"] for i in r["Instances"]]


def own_images(ec2) -> list[dict]:
    return ec2.describe_images(Owners=["self"])["Images"]
