"""The nvidia runtime on real containerd 1.6 / 1.7 / 2.x and Docker 20.10 / 26.1, judged by what they load.

Each host runs the Debian suite that ships that version: bookworm (containerd 1.6, docker.io 20.10), trixie
(containerd 1.7, docker.io 26.1) and sid (containerd 2.x). The proof is `containerd config dump` and `docker info`,
never the text gpunode wrote.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, host_inventory, run_cli

pytestmark = pytest.mark.lab

SUITES = {"bookworm": "1.6", "trixie": "1.7", "sid": "2."}
USER_COMMENT = "# kubeadm: the systemd cgroup driver and the regional pause mirror (do not remove)"
PAUSE = "registry.example.cn/acs/pause:3.9"
APT = "DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout=300"


CONTAINERD_STEPS = ("nvidia runtime for containerd",)
DOCKER_STEPS = ("Docker", "nvidia runtime for Docker")


def runtime_playbook(path: Path, names: tuple[str, ...]) -> Path:
    """The steps of gpu-node.yml whose names start with `names`, with their handlers, as a playbook."""
    node = yaml.safe_load((REPO / "playbooks/gpu-node.yml").read_text())
    steps = [s for s in node["steps"] if any(s.get("name", "") == n or s.get("name", "").startswith(n + " (")
                                             for n in names)]
    assert len(steps) == len(names), [s.get("name") for s in node["steps"]]
    notified = {s["notify"] for s in steps if "notify" in s}
    handlers = [h for h in node["handlers"] if h["name"] in notified]
    path.write_text(yaml.safe_dump({"name": "runtime steps of gpu-node", "vars": node["vars"], "steps": steps,
                                    "handlers": handlers}))
    return path


def inside(host, command: str, timeout: float = 600) -> str:
    result = host.run_inside(command, timeout=timeout)
    assert result.returncode == 0, f"{command}: {result.stdout}{result.stderr}"
    return result.stdout


def install(host, *packages: str) -> None:
    inside(host, f"{APT} update >/dev/null && {APT} install -y --no-install-recommends {' '.join(packages)} "
                 ">/dev/null", timeout=900)


def kubeadm_config(default: str) -> str:
    """`containerd config default` edited the way kubeadm guides and the clouds do, with a comment line."""
    text = re.sub(r"SystemdCgroup = false", "SystemdCgroup = true", default)
    text = re.sub(r"""(?m)^(\s*)(sandbox_image|sandbox) = ["'][^"']*["']""", rf'\1{USER_COMMENT}\n\1\2 = "{PAUSE}"',
                  text)
    text = re.sub(r"(?m)^(\s*config_path = )['\"]['\"]", r'\1"/etc/containerd/certs.d"', text, count=1)
    assert text.count(PAUSE) == 1 and "SystemdCgroup = true" in text and "certs.d" in text, text
    return text


def loaded(host) -> dict:
    """What containerd loads (its own dump), parsed."""
    return tomllib.loads(inside(host, "containerd config dump"))


def differences(a: object, b: object, path: str = "") -> list[str]:
    """Where two parsed configs differ, as dotted paths with both values (readable assertion messages)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for key in sorted(a.keys() | b.keys())
                for d in differences(a.get(key, "<missing>"), b.get(key, "<missing>"), f"{path}.{key}")]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def cri_runtimes(config: dict) -> tuple[dict, dict]:
    """(the CRI `containerd` table, its runtimes) for config version 2 (1.x) or 3 (2.x)."""
    plugins = config["plugins"]
    cri = plugins.get("io.containerd.cri.v1.runtime") or plugins["io.containerd.grpc.v1.cri"]
    return cri["containerd"], cri["containerd"]["runtimes"]


def provision(lab, host, playbook: Path, tmp_path: Path, *args: str):
    inventory = host_inventory(lab, [host], tmp_path / "inv.yml")
    report = tmp_path / "report.json"
    result = run_cli("provision", "-i", str(inventory), "--playbook", str(playbook), "--json-report", str(report),
                     *args)
    return result, json.loads(report.read_text())["hosts"][0] if report.exists() else {}


@pytest.fixture
def containerd_host(request, new_host):
    """A fresh host of the suite in request.param with its distro containerd and a kubeadm-style config."""
    host = new_host(request.param)
    install(host, "containerd")
    assert SUITES[request.param] in inside(host, "containerd --version")
    config = kubeadm_config(inside(host, "containerd config default"))
    (host.root / "etc/containerd/config.toml").write_text(config)
    inside(host, "systemctl restart containerd && systemctl is-active containerd")
    return host


@pytest.mark.parametrize("containerd_host", list(SUITES), indirect=True)
def test_containerd_loads_the_same_config_plus_the_nvidia_runtime(lab, containerd_host, tmp_path):
    host = containerd_host
    before = loaded(host)
    playbook = runtime_playbook(tmp_path / "containerd.yml", CONTAINERD_STEPS)
    result, report = provision(lab, host, playbook, tmp_path)
    assert result.code == 0, result.output
    assert [s["status"] for s in report["steps"]] == ["changed", "changed"]  # the step, then its restart handler

    after = loaded(host)
    containerd, runtimes = cri_runtimes(after)
    nvidia = runtimes.pop("nvidia")
    assert differences(after, before) == [], "containerd loads something else, besides the nvidia runtime"
    assert nvidia["options"]["SystemdCgroup"] is True
    assert nvidia["options"]["BinaryName"] == "nvidia-container-runtime"
    assert nvidia["runtime_type"] == "io.containerd.runc.v2"
    assert containerd["default_runtime_name"] == "runc"
    assert PAUSE in json.dumps(after)
    text = (host.root / "etc/containerd/config.toml").read_text()
    assert USER_COMMENT in text
    assert list((host.root / "etc/containerd").glob("config.toml.*.gpunode.bak"))
    assert inside(host, "systemctl is-active containerd").strip() == "active"
    cri = [line.split() for line in inside(host, "ctr plugins ls").splitlines() if re.search(r"\scri\s", line)]
    assert cri and all(row[-1] == "ok" for row in cri), cri

    again, report = provision(lab, host, playbook, tmp_path)
    assert again.code == 0, again.output
    assert [s["status"] for s in report["steps"]] == ["ok"]
    assert report["exec_count"] == 1


@pytest.mark.parametrize("containerd_host", ["bookworm", "sid"], indirect=True)
def test_containerd_default_runtime_changes_only_the_default(lab, containerd_host, tmp_path):
    host = containerd_host
    before = loaded(host)
    playbook = runtime_playbook(tmp_path / "containerd.yml", CONTAINERD_STEPS)
    result, _ = provision(lab, host, playbook, tmp_path, "--var", "containerd_default_runtime=true")
    assert result.code == 0, result.output
    after = loaded(host)
    containerd, runtimes = cri_runtimes(after)
    assert containerd.pop("default_runtime_name") == "nvidia"
    runtimes.pop("nvidia")
    cri_runtimes(before)[0].pop("default_runtime_name")
    assert differences(after, before) == []


@pytest.mark.parametrize("containerd_host", ["bookworm"], indirect=True)
def test_malformed_containerd_config_is_refused_untouched_and_not_restarted(lab, containerd_host, tmp_path):
    host = containerd_host
    config = host.root / "etc/containerd/config.toml"
    broken = config.read_text().replace('SystemdCgroup = true', 'SystemdCgroup = tru e', 1).encode()
    config.write_bytes(broken)
    line = broken.decode().splitlines().index(next(x for x in broken.decode().splitlines() if "tru e" in x)) + 1
    started = inside(host, "systemctl show -p ExecMainStartTimestampMonotonic -p MainPID containerd")
    playbook = runtime_playbook(tmp_path / "containerd.yml", CONTAINERD_STEPS)
    result, report = provision(lab, host, playbook, tmp_path)
    assert result.code == 1, result.output
    assert "/etc/containerd/config.toml is not valid TOML" in report["error"]
    assert f"(line {line}, column " in report["error"]
    assert config.read_bytes() == broken
    assert not list(config.parent.glob("config.toml.*.gpunode.bak"))
    assert inside(host, "systemctl show -p ExecMainStartTimestampMonotonic -p MainPID containerd") == started


@pytest.mark.parametrize("suite, docker_version", [("bookworm", "20.10"), ("trixie", "26.1")])
def test_docker_info_lists_the_nvidia_runtime_and_keeps_user_keys(lab, new_host, tmp_path, suite, docker_version):
    host = new_host(suite)
    user = {"log-driver": "json-file", "log-opts": {"max-size": "10m"}, "registry-mirrors": ["https://mirror.example"],
            "default-ulimits": {"nofile": {"Name": "nofile", "Hard": 65536, "Soft": 65536}}}
    (host.root / "etc/docker").mkdir()
    (host.root / "etc/docker/daemon.json").write_text(json.dumps(user, indent=2))
    playbook = runtime_playbook(tmp_path / "docker.yml", DOCKER_STEPS)  # gpunode installs Docker too
    result, report = provision(lab, host, playbook, tmp_path, "--var", "docker_default_runtime=true")
    assert result.code == 0, result.output
    assert inside(host, "docker version --format '{{.Server.Version}}'").startswith(docker_version)
    info = json.loads(inside(host, "docker info --format '{{json .}}'"))
    assert "nvidia" in info["Runtimes"] and "runc" in info["Runtimes"]
    assert info["DefaultRuntime"] == "nvidia"
    assert info["LoggingDriver"] == "json-file"
    assert "https://mirror.example/" in info["RegistryConfig"]["Mirrors"]
    saved = json.loads((host.root / "etc/docker/daemon.json").read_text())
    assert {k: saved[k] for k in user} == user
    again, report = provision(lab, host, playbook, tmp_path, "--var", "docker_default_runtime=true")
    assert again.code == 0 and [s["status"] for s in report["steps"]] == ["ok", "ok"], again.output


OLD_DROPIN = '''# Written by gpunode: the NVIDIA runtime for containerd.
version = 2
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
  runtime_type = "io.containerd.runc.v2"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
  BinaryName = "nvidia-container-runtime"
'''


def test_upgrade_from_the_old_drop_in_restores_the_cri_settings(lab, new_host, tmp_path):
    """A node set up by an older gpunode (a drop-in that wiped the CRI section) on Debian's own config.toml,
    which has no runc table: runc's settings come from what containerd loads."""
    host = new_host("bookworm")
    install(host, "containerd")
    original = loaded(host)
    config = host.root / "etc/containerd/config.toml"
    config.write_text('imports = ["/etc/containerd/conf.d/*.toml"]\n' + config.read_text())
    (host.root / "etc/containerd/conf.d").mkdir()
    (host.root / "etc/containerd/conf.d/99-nvidia.toml").write_text(OLD_DROPIN)
    inside(host, "systemctl restart containerd")
    assert cri_runtimes(loaded(host))[1].keys() == {"nvidia"}, "the old drop-in no longer wipes runc: test is stale"

    playbook = runtime_playbook(tmp_path / "containerd.yml", CONTAINERD_STEPS)
    result, _ = provision(lab, host, playbook, tmp_path)
    assert result.code == 0, result.output
    assert not (host.root / "etc/containerd/conf.d/99-nvidia.toml").exists()
    after = loaded(host)
    nvidia = cri_runtimes(after)[1].pop("nvidia")
    after.pop("imports", None)
    original.pop("imports", None)
    assert differences(after, original) == []
    runc_options = cri_runtimes(original)[1]["runc"]["options"]
    assert nvidia["options"] == {**runc_options, "BinaryName": "nvidia-container-runtime"}


def test_a_cri_section_in_an_imported_file_is_found_before_anything_is_written(lab, new_host, tmp_path):
    """containerd 1.x: an imported drop-in's CRI section replaces the main file's, so a runtime added to
    config.toml would silently not load. containerd itself validates the new file: the step fails, nothing changes."""
    host = new_host("bookworm")
    install(host, "containerd")
    config = host.root / "etc/containerd/config.toml"
    config.write_text('imports = ["/etc/containerd/conf.d/*.toml"]\n' + config.read_text())
    (host.root / "etc/containerd/conf.d").mkdir()
    (host.root / "etc/containerd/conf.d/10-kubeadm.toml").write_text(
        'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "' + PAUSE + '"\n')
    inside(host, "systemctl restart containerd")
    original = config.read_bytes()
    playbook = runtime_playbook(tmp_path / "containerd.yml", CONTAINERD_STEPS)
    result, report = provision(lab, host, playbook, tmp_path)
    assert result.code == 1, result.output
    assert "failed validation" in report["error"] and "imported file" in report["fix"]
    assert config.read_bytes() == original
    assert "nvidia" not in json.dumps(loaded(host))


def test_a_bad_value_from_a_variable_names_the_variable(tmp_path):
    """`--var containerd_default_runtime=maybe`: refused before any host is contacted (the playbook declares it a
    true/false variable), naming the variable, where it is declared and what to give instead."""
    playbook = runtime_playbook(tmp_path / "containerd.yml", CONTAINERD_STEPS)
    result = run_cli("provision", "-H", "192.0.2.1", "--playbook", str(playbook),
                     "--var", "containerd_default_runtime=maybe")
    assert result.code == 2, result.output
    assert "containerd_default_runtime='maybe' is not true or false" in result.stderr
    assert f"{playbook}:" in result.stderr
    assert "fix: give containerd_default_runtime=true or containerd_default_runtime=false" in result.stderr
