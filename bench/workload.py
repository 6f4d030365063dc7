"""The same work for every tool: packages, a config line, an fstab line and a key merged into a JSON file.

Each writer puts one tool's playbook/deploy and inventory into a folder and returns their paths. The hosts are
seeded first (`seed_host`) with an existing config file and JSON file, so every tool edits, not creates.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import yaml

PACKAGES = ["jq", "curl"]
CONF_DIR = "/etc/gpunode-bench"
APP_CONF = f"{CONF_DIR}/app.conf"
APP_REGEXP = "^max_conns="
APP_LINE = "max_conns=64"
FSTAB = "/etc/fstab"
FSTAB_REGEXP = r"^\S+\s+/mnt/bench-scratch\s"
FSTAB_LINE = "tmpfs /mnt/bench-scratch tmpfs noauto,size=64m 0 0"  # noauto: lab kernels cannot NFS mount
JSON_FILE = f"{CONF_DIR}/daemon.json"
JSON_KEY, JSON_VALUE = "log-level", "warn"
SEED_APP_CONF = "# bench application config\nmax_conns=16\nworkers=4\n"
SEED_JSON = {"data-root": "/var/lib/docker", "log-driver": "json-file"}

@dataclass(frozen=True)
class BenchHost:
    """A host as the tools see it."""

    name: str
    address: str
    port: int = 22


@dataclass(frozen=True)
class Access:
    """How every tool logs in: user, key, and the lab's known_hosts (host keys are verified by all three)."""

    user: str
    key: str
    known_hosts: str


def seed_host(root: Path) -> None:
    """Write the files that exist before any tool runs (an app config and a JSON config with other keys)."""
    conf = root / CONF_DIR.lstrip("/")
    conf.mkdir(parents=True, exist_ok=True)
    (root / APP_CONF.lstrip("/")).write_text(SEED_APP_CONF)
    (root / JSON_FILE.lstrip("/")).write_text(json.dumps(SEED_JSON, indent=2) + "\n")


def check_host_state(root: Path) -> list[str]:
    """What is wrong with a host's end state (empty when the work is done); reads the host's files directly."""
    problems = []
    app = (root / APP_CONF.lstrip("/")).read_text().splitlines()
    if [ln for ln in app if ln.startswith("max_conns=")] != [APP_LINE] or "workers=4" not in app:
        problems.append(f"{APP_CONF}: {app}")
    fstab = [ln for ln in (root / "etc/fstab").read_text().splitlines() if "/mnt/bench-scratch" in ln]
    if fstab != [FSTAB_LINE]:
        problems.append(f"fstab: {fstab}")
    data = json.loads((root / JSON_FILE.lstrip("/")).read_text())
    if data != {**SEED_JSON, JSON_KEY: JSON_VALUE}:
        problems.append(f"{JSON_FILE}: {data}")
    status = root / "var/lib/dpkg/status"
    installed = _installed_packages(status.read_text())
    problems += [f"package {p} not installed" for p in PACKAGES if p not in installed]
    return problems


def _installed_packages(status: str) -> set[str]:
    names = set()
    for block in status.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line and not line[0].isspace())
        if fields.get("Status") == "install ok installed":
            names.add(fields.get("Package", ""))
    return names


# ---- gpunode -------------------------------------------------------------------------------------------
def write_gpunode(folder: Path, hosts: list[BenchHost], access: Access) -> tuple[Path, Path]:
    """playbook.yml and inventory.yml for gpunode."""
    steps = [
        {"name": "packages", "packages": {"names": PACKAGES}},
        {"name": "config line", "line": {"path": APP_CONF, "regexp": APP_REGEXP, "line": APP_LINE}},
        {"name": "fstab line", "line": {"path": FSTAB, "regexp": FSTAB_REGEXP, "line": FSTAB_LINE}},
        {"name": "json key", "json": {"path": JSON_FILE, "set": {JSON_KEY: JSON_VALUE}}},
    ]
    playbook = _dump(folder / "gpunode.yml", {"name": "bench", "steps": steps})
    inventory = _dump(folder / "gpunode-inventory.yml", _ansible_inventory(hosts, access, {
        "known_hosts": access.known_hosts}))
    return playbook, inventory


# ---- ansible-core --------------------------------------------------------------------------------------
def write_ansible(folder: Path, hosts: list[BenchHost], access: Access, gather_facts: bool = False,
                  ) -> tuple[Path, Path]:
    """An ansible playbook doing the same; JSON merged the Ansible way: slurp, combine, copy content."""
    tasks = [
        {"name": "packages", "ansible.builtin.apt": {
            "name": PACKAGES, "state": "present", "update_cache": True, "cache_valid_time": 3600,
            "install_recommends": False}},
        {"name": "config line", "ansible.builtin.lineinfile": {
            "path": APP_CONF, "regexp": APP_REGEXP, "line": APP_LINE, "create": True, "backup": True}},
        {"name": "fstab line", "ansible.builtin.lineinfile": {
            "path": FSTAB, "regexp": FSTAB_REGEXP, "line": FSTAB_LINE, "backup": True}},
        {"name": "read json", "ansible.builtin.slurp": {"src": JSON_FILE}, "register": "cfg"},
        {"name": "json key", "ansible.builtin.copy": {
            "dest": JSON_FILE, "backup": True,
            "content": "{{ cfg.content | b64decode | from_json | combine(merge) | to_nice_json }}\n"},
         "vars": {"merge": {JSON_KEY: JSON_VALUE}}},
    ]
    play = [{"name": "bench", "hosts": "all", "become": True, "gather_facts": gather_facts, "tasks": tasks}]
    name = "ansible-facts" if gather_facts else "ansible"
    playbook = _dump(folder / f"{name}.yml", play)
    inventory = _dump(folder / f"{name}-inventory.yml", _ansible_inventory(hosts, access, {
        "ansible_python_interpreter": "/usr/bin/python3"}))
    return playbook, inventory


def _ansible_inventory(hosts: list[BenchHost], access: Access, extra: dict) -> dict:
    return {"all": {
        "hosts": {h.name: {"ansible_host": h.address, **({"ansible_port": h.port} if h.port != 22 else {})}
                  for h in hosts},
        "vars": {"ansible_user": access.user, "ansible_become": True,
                 "ansible_ssh_private_key_file": access.key, **extra},
    }}


# ---- pyinfra -------------------------------------------------------------------------------------------
PYINFRA_DEPLOY = f'''"""The bench work as a pyinfra deploy (written by bench/workload.py)."""
import json
from io import StringIO

from pyinfra import host
from pyinfra.facts.files import FileContents
from pyinfra.operations import apt, files

apt.packages(name="packages", packages={PACKAGES!r}, update=True, cache_time=3600, no_recommends=True)
files.line(name="config line", path={APP_CONF!r}, line={APP_REGEXP + ".*"!r}, replace={APP_LINE!r},
           backup=True)
files.line(name="fstab line", path={FSTAB!r}, line={FSTAB_REGEXP + ".*"!r}, replace={FSTAB_LINE!r},
           backup=True)
current = json.loads("\\n".join(host.get_fact(FileContents, path={JSON_FILE!r}) or ["{{}}"]))
current[{JSON_KEY!r}] = {JSON_VALUE!r}
files.put(name="json key", src=StringIO(json.dumps(current, indent=2) + "\\n"), dest={JSON_FILE!r})
'''


def write_pyinfra(folder: Path, hosts: list[BenchHost], access: Access) -> tuple[Path, Path]:
    """deploy.py (pyinfra operations) and inventory.py (ssh_user/ssh_key/ssh_known_hosts_file, sudo)."""
    deploy = folder / "pyinfra_deploy.py"
    deploy.write_text(PYINFRA_DEPLOY)
    data = {"ssh_user": access.user, "ssh_key": access.key, "ssh_known_hosts_file": access.known_hosts,
            "ssh_strict_host_key_checking": "yes", "_sudo": True}
    entries = ",\n".join(f"    ({h.name!r}, {{**DATA, 'ssh_hostname': {h.address!r}, 'ssh_port': {h.port}}})"
                          for h in hosts)
    inventory = folder / "pyinfra_inventory.py"
    inventory.write_text(f"DATA = {data!r}\nbench = [\n{entries},\n]\n")
    return deploy, inventory


def _dump(path: Path, data: object) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False, width=1000))
    return path
