"""A playbook of the user's own that includes built-in ones, run for real on lab hosts: included vars, the user's
own step, tags, precedence (include vars < inventory < --var), and a second run that changes nothing."""

from __future__ import annotations

import json

import pytest
import yaml

from gpunode.playbook.builtin import builtin_path
from tests.conftest import host_inventory, run_cli

pytestmark = pytest.mark.lab

# NVIDIA's container toolkit repository is not reachable from the lab; the lab's kernel has no Debian headers, so
# gpu-node installs the newest Debian kernel and leaves the reboot to the next boot (as an image bake does).
SITE = """\
name: my-site
steps:
  - include: gpu-node
    vars: {install_container_toolkit: false, kernel_policy: upgrade, reboot: defer}
  - name: my own step after gpu-node
    tags: [mine]
    line: {path: /etc/motd, line: "GPU node {{ inventory_hostname }}, provisioned by gpunode", create: true}
"""


def provision(inventory, playbook, tmp_path, report: str, *args: str):
    result = run_cli("provision", "-i", str(inventory), "--playbook", str(playbook), "--json-report",
                     str(tmp_path / report), *args, timeout=1800)
    host = json.loads((tmp_path / report).read_text())["hosts"][0] if (tmp_path / report).exists() else None
    return result, host


def test_site_including_gpu_node_runs_and_converges_without_the_driver_tags(lab, fresh_host, tmp_path):
    """gpu-node's Docker, runtime and reboot steps from the include, plus the user's step; the DKMS build (tags
    kernel, driver) is skipped here to keep the default suite short: the slow test below runs everything."""
    site = tmp_path / "site.yml"
    site.write_text(SITE)
    inventory = host_inventory(lab, [fresh_host], tmp_path / "inv.yml")
    first, host = provision(inventory, site, tmp_path, "first.json", "--skip-tags", "kernel,driver")
    assert first.code == 0, first.output
    ran = [(s["name"], s["where"].rsplit("/", 1)[-1].split(":")[0]) for s in host["steps"]]
    node = yaml.safe_load(builtin_path("gpu-node").read_text())
    included = [s["name"] for s in node["steps"] if not {"kernel", "driver"} & set(s.get("tags", []))]
    assert ran == [*((name, "gpu-node.yml") for name in included), ("my own step after gpu-node", "site.yml"),
                   *((h["name"], "gpu-node.yml") for h in node["handlers"])]  # included handlers, in their order
    statuses = {s["name"]: s["status"] for s in host["steps"]}
    assert statuses["NVIDIA container toolkit"] == "skipped"  # the include's vars reached the step's `when:`
    assert statuses["Docker"] == statuses["my own step after gpu-node"] == "changed"
    assert fresh_host.run_inside("systemctl is-active docker").stdout.strip() == "active"
    assert json.loads((fresh_host.root / "etc/docker/daemon.json").read_text())["runtimes"]["nvidia"]
    assert f"GPU node {fresh_host.name}, provisioned by gpunode" in (fresh_host.root / "etc/motd").read_text()
    assert "nvidia-kernel-dkms" not in fresh_host.run_inside("dpkg-query -W -f='${Package} ' 2>/dev/null").stdout

    second, host = provision(inventory, site, tmp_path, "second.json", "--skip-tags", "kernel,driver")
    assert second.code == 0, second.output
    assert host["changed"] == 0, host["steps"]


def test_tags_select_steps_and_an_unknown_tag_is_refused(lab, fresh_host, tmp_path):
    site = tmp_path / "site.yml"
    site.write_text(SITE)
    inventory = host_inventory(lab, [fresh_host], tmp_path / "inv.yml")
    result, host = provision(inventory, site, tmp_path, "mine.json", "--tags", "mine")
    assert result.code == 0, result.output
    assert [s["name"] for s in host["steps"]] == ["wait for the package manager", "my own step after gpu-node"]
    assert "provisioned by gpunode" in (fresh_host.root / "etc/motd").read_text()

    unknown, _ = provision(inventory, site, tmp_path, "none.json", "--tags", "drivers")
    assert unknown.code == 2
    assert "no step of" in unknown.stderr and "'drivers'" in unknown.stderr and "driver" in unknown.stderr
    assert not (tmp_path / "none.json").exists()  # nothing ran


def test_include_vars_are_defaults_that_inventory_and_cli_override(lab, fresh_host, tmp_path):
    site = tmp_path / "site.yml"
    site.write_text("steps:\n  - include: base\n    vars: {journald_max_use: 2G}\n")
    conf = fresh_host.root / "etc/systemd/journald.conf"

    def run(*args: str, **inventory_vars) -> str:
        inventory = host_inventory(lab, [fresh_host], tmp_path / "inv.yml", **inventory_vars)
        result = run_cli("provision", "-i", str(inventory), "--playbook", str(site), "--tags", "journald", *args)
        assert result.code == 0, result.output
        return next(line for line in conf.read_text().splitlines() if line.startswith("SystemMaxUse="))

    assert run() == "SystemMaxUse=2G"                                    # the include's vars over base's 1G
    assert run(journald_max_use="3G") == "SystemMaxUse=3G"              # inventory over the include
    assert run("--var", "journald_max_use=4G", journald_max_use="3G") == "SystemMaxUse=4G"  # --var over all


@pytest.mark.slow
@pytest.mark.extended  # repeats the DKMS build of test_lab_gpu_stack.py through an include: opt-in
def test_site_including_all_of_gpu_node_runs_and_second_run_changes_nothing(lab, fresh_host, tmp_path):
    """Minutes: the whole gpu-node (a real Debian kernel + headers, the NVIDIA driver built with DKMS)."""
    site = tmp_path / "site.yml"
    site.write_text(SITE)
    inventory = host_inventory(lab, [fresh_host], tmp_path / "inv.yml")
    first, host = provision(inventory, site, tmp_path, "first.json")
    assert first.code == 0, first.output
    assert {s["name"]: s["status"] for s in host["steps"]}["NVIDIA driver"] == "changed"
    assert "nvidia-current/535" in fresh_host.run_inside("dkms status").stdout
    assert "provisioned by gpunode" in (fresh_host.root / "etc/motd").read_text()
    second, host = provision(inventory, site, tmp_path, "second.json")
    assert second.code == 0, second.output
    assert host["changed"] == 0, host["steps"]
