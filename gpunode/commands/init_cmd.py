"""`init DIR`: a project of the user's own: an Ansible-layout inventory documenting every variable, a site
playbook that includes the built-in ones, a README of the next commands and a tasks.py for invoke."""

from __future__ import annotations

import textwrap
from pathlib import Path

from gpunode.distros import example_login_user
from gpunode.errors import UsageError
from gpunode.playbook.catalog import PlaybookInfo, describe_builtins, yaml_value

SKIPPED = {"image-finalize"}  # its variables are set by build-ami/bake themselves

HOSTS = """\
# Your GPU nodes: an Ansible INI inventory (gpunode reads Ansible inventories, YAML or INI, unchanged).
# One line per node: its name, its address and how to log in. site.yml runs on the group `gpu`.
# Variables for all hosts: group_vars/all.yml; for one host: host_vars/<name>.yml.
[gpu]
gpu-1 ansible_host=203.0.113.10 ansible_user={user}
# gpu-2 ansible_host=203.0.113.11 ansible_user={user}
""".replace("{user}", example_login_user)  # the example login: the default base's cloud user

HOST_VARS = """\
# Variables for gpu-1 only; they override group_vars/all.yml. Uncomment to use, for example:
# expect_gpus: 8                     # verify-gpu: the GPUs this instance type has
# expect_model: A100
# driver_branch: 580                 # this node needs a newer driver than the others
"""

CONNECTION = """\
# --- how gpunode logs in (Ansible's names; the short native names address/port/user/key/become work too)
# ansible_user: {user}
# ansible_port: 22
# ansible_ssh_private_key_file: ~/.ssh/id_ed25519
# ansible_become: true               # sudo for a non-root user (root needs none)
# ansible_ssh_common_args: '-o ProxyJump=user@bastion'   # through a bastion
# known_hosts: ./known_hosts         # an extra known_hosts file for these hosts (gpunode verifies host keys)
""".replace("{user}", example_login_user)  # the example login: the default base's cloud user

VERIFY = """\
# --- verify-gpu expectations (gpunode verify-gpu -i inventory gpu)
# expect_gpus: null                  # GPUs each node must show, e.g. 8
# expect_model: null                 # text the GPU name must contain, e.g. H100
# min_driver: null                   # lowest acceptable driver version, e.g. "535.104"
# expected_mounts: []                # NFS shares that must be mounted: a list of nfs_mount arguments
"""

SITE = """\
# Your site playbook: the built-in steps, then your own. gpunode validates it all before touching a host.
#   gpunode provision -i inventory --playbook site.yml [--check] [--tags gpu] [--var driver_branch=580]
# `include:` takes a built-in playbook by name (`gpunode playbooks` lists them) or a file, relative to this one.
# Variables: the included playbook's defaults < this file's and the include's `vars:` < inventory < --var.
name: site
hosts: gpu
steps:
  - include: base              # packages, a bounded journal, no unattended upgrades
    tags: [base]

  - include: gpu-node          # kernel headers, the NVIDIA driver, Docker, container toolkit, nvidia runtime
    tags: [gpu]
    # vars: {driver_branch: 580, kernel_policy: upgrade}

  - name: your own steps come here, e.g. the tools your users expect
    tags: [site]
    packages: {names: [htop, tmux]}
"""

TASKS = '''\
"""Invoke tasks for this project (`invoke --list`): the same tasks as the `gpunode` command, e.g.
`invoke provision -i inventory --playbook site.yml --check`."""

from gpunode.tasks import ns  # noqa: F401 - invoke looks for `ns`
'''

README = """\
# GPU nodes, provisioned with gpunode

Made by `gpunode init`. gpunode provisions cloud GPU nodes over SSH: kernel headers, the NVIDIA driver, Docker and
NVIDIA's container toolkit, NFS shares, health checks, images. It is not on PyPI: install it from a wheel, built
once in a gpunode checkout (or taken from someone who built one):

    pip wheel --no-deps -w dist .     # in the gpunode checkout
    pipx install dist/gpunode-*.whl   # or, inside a virtualenv: pip install dist/gpunode-*.whl

| file | what it is |
|---|---|
| `inventory/hosts` | your nodes (Ansible INI; a YAML inventory works too) |
| `inventory/group_vars/all.yml` | every variable of the built-in playbooks with its default, commented |
| `inventory/host_vars/gpu-1.yml` | variables for one node |
| `site.yml` | your playbook: the built-in `base` and `gpu-node` steps, then your own |
| `tasks.py` | the same tasks for `invoke` users (`invoke --list`) |

## Next

1. Put your nodes in `inventory/hosts`, then look at what gpunode makes of them:

       gpunode inventory -i inventory --graph

2. See what would change, with diffs, changing nothing:

       gpunode provision -i inventory --playbook site.yml --check

3. Provision (parallel, idempotent: a second run changes nothing):

       gpunode provision -i inventory --playbook site.yml

Then `gpunode verify-gpu -i inventory gpu` checks each node's GPU stack, and `gpunode build-ami --playbook site.yml`
bakes the same into an AMI. `gpunode playbooks` lists the built-in playbooks, their tags and variables;
`--tags gpu` (or `--skip-tags base`) runs a part of `site.yml`; `gpunode --help` lists every task.
"""


def group_vars(infos: list[PlaybookInfo]) -> str:
    """group_vars/all.yml: every variable of the built-in playbooks with its default, all commented out."""
    parts = ["# Variables for every host (Ansible layout: group_vars/<group>.yml, host_vars/<host>.yml).\n"
             "# Each line is a variable with its default; uncomment a line to change it for all hosts.\n"
             "# Precedence: a playbook's defaults < group_vars < host_vars < --var KEY=VALUE.\n"
             "# The list comes from the playbooks themselves: `gpunode playbooks` shows it for your version.\n\n",
             CONNECTION]
    for info in infos:
        if info.name in SKIPPED:
            continue
        about = textwrap.shorten(info.description.split(" Tags ")[0], 100, placeholder="...")
        parts.append(f"\n# --- playbook {info.name}: {about}\n")
        width = max(len(f"{v.name}: {_value(v)}") for v in info.variables) + 1
        for var in info.variables:
            setting = f"{var.name}: {_value(var)}"
            comment = f"required by {info.name}: set it to use {info.name}" if var.required else var.comment
            parts.append(f"# {setting.ljust(width)}  # {comment}\n" if comment else f"# {setting}\n")
    parts.append("\n" + VERIFY)
    return "".join(parts)


def _value(var) -> str:
    return "" if var.required else yaml_value(var.default)


def init_project(directory: str, force: bool = False) -> str:
    """Write the project files; refuses to overwrite any of them unless `force`. Returns what to do next."""
    if directory.startswith("-"):
        raise UsageError(f"{directory!r} is an option, not a folder name",
                         fix="help: gpunode --help init; a folder starting with '-': gpunode init ./-name")
    if "\0" in directory:
        raise UsageError(f"{directory!r} is not a folder name", fix="give a folder name, e.g. gpunode init infra")
    root = Path(directory).expanduser()
    if root.exists() and not root.is_dir():
        raise UsageError(f"{directory} exists and is not a folder",
                         fix="give a new folder name, e.g. gpunode init infra")
    files = {
        "inventory/hosts": HOSTS,
        "inventory/group_vars/all.yml": group_vars(describe_builtins()),
        "inventory/host_vars/gpu-1.yml": HOST_VARS,
        "site.yml": SITE,
        "README.md": README,
        "tasks.py": TASKS,
        ".gitignore": ".gpunode/\n",
    }
    existing = [name for name in files if (root / name).exists()]
    if existing and not force:
        raise UsageError(f"{directory} already has {', '.join(existing)}",
                         fix="choose a new folder, or --force to overwrite these files")
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    listing = "".join(f"  {root / name}\n" for name in files)
    return (f"created:\n{listing}next: cd {directory}, put your nodes in inventory/hosts, then\n"
            "  gpunode inventory -i inventory --graph\n"
            "  gpunode provision -i inventory --playbook site.yml --check\n"
            "  gpunode provision -i inventory --playbook site.yml\n")
