"""The peer tools (ansible-core, pyinfra) live in their own venv, never in gpunode's environment, pinned in
bench/peers-requirements.txt. ansible-core 2.20+ needs Python 3.12+ on the controller, so the venv is made with
the newest python3.12+ found ($GPUNODE_BENCH_PEER_PYTHON, python3.1x on PATH, pyenv's versions); with none, gpunode's
python and ANSIBLE_FOR_OLD_PYTHON (the last ansible-core that runs on Python 3.11)."""

from __future__ import annotations

import importlib.metadata as metadata
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
DEFAULT_VENV = BENCH / ".venv-peers"
REQUIREMENTS = BENCH / "peers-requirements.txt"  # matplotlib only for the optional plot
ANSIBLE_FOR_OLD_PYTHON = "ansible-core==2.19.14"
NEWEST_ANSIBLE_PYTHON = (3, 12)


def pins(python_version: tuple[int, int]) -> dict[str, str]:
    """package -> pinned version, from the requirements file (ansible-core downgraded for a Python < 3.12)."""
    found = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", REQUIREMENTS.read_text(), re.MULTILINE))
    if python_version < NEWEST_ANSIBLE_PYTHON:
        found["ansible-core"] = ANSIBLE_FOR_OLD_PYTHON.split("==")[1]
    return found


def peer_python() -> Path:
    """The python the peers' venv is made with: the newest 3.12+ found, else gpunode's own."""
    chosen = os.environ.get("GPUNODE_BENCH_PEER_PYTHON")
    if chosen:
        return Path(chosen)
    candidates = [shutil.which(f"python3.{minor}") for minor in range(14, 11, -1)]
    candidates += sorted(map(str, Path.home().glob(".pyenv/versions/3.1[2-9]*/bin/python3")), reverse=True)
    best: tuple[tuple[int, int], str] | None = None
    for candidate in filter(None, candidates):
        version = _python_version(Path(candidate))
        if version and version >= NEWEST_ANSIBLE_PYTHON and (best is None or version > best[0]):
            best = (version, candidate)
    return Path(best[1]) if best else Path(sys.executable)


def _python_version(python: Path) -> tuple[int, int] | None:
    """(major, minor) of a python that runs (a pyenv shim for a version not selected does not)."""
    try:
        done = subprocess.run([str(python), "-c", "import sys; print(*sys.version_info[:2])"], capture_output=True,
                              text=True, timeout=30)
    except OSError:
        return None
    parts = done.stdout.split()
    return (int(parts[0]), int(parts[1])) if done.returncode == 0 and len(parts) == 2 else None


def peer_venv() -> Path:
    """The venv's folder: $GPUNODE_BENCH_VENV or bench/.venv-peers."""
    return Path(os.environ.get("GPUNODE_BENCH_VENV", DEFAULT_VENV))


def ensure_peers(venv: Path | None = None) -> Path:
    """Create the venv and install the pinned peers from PyPI when missing or at other versions; its bin/."""
    venv = venv or peer_venv()
    bin_dir = venv / "bin"
    if not (bin_dir / "python").exists():
        python = peer_python()
        print(f"creating {venv} with {python}", file=sys.stderr)
        subprocess.run([str(python), "-m", "venv", str(venv)], check=True)
    version = _python_version(bin_dir / "python") or (3, 11)
    wanted = pins(version)
    if _installed(bin_dir, list(wanted)) != wanted:
        specs = [f"{name}=={pinned}" for name, pinned in wanted.items()]
        print(f"installing {' '.join(specs)} into {venv}", file=sys.stderr)
        subprocess.run([str(bin_dir / "pip"), "install", "-q", *specs], check=True)
    return bin_dir


def _installed(bin_dir: Path, names: list[str]) -> dict[str, str | None]:
    script = ("import importlib.metadata as m, json, sys\n"
              "def v(p):\n    try: return m.version(p)\n    except m.PackageNotFoundError: return None\n"
              "print(json.dumps({p: v(p) for p in sys.argv[1:]}))")
    done = subprocess.run([str(bin_dir / "python"), "-c", script, *names], capture_output=True, text=True)
    return json.loads(done.stdout) if done.returncode == 0 else {}


def versions(bin_dir: Path) -> dict[str, str]:
    """Installed versions of the peers (and of gpunode and its SSH stack), for the results."""
    script = (
        "import importlib.metadata as m, json; "
        "import sys; print(json.dumps({**{p: m.version(p) for p in ('ansible-core', 'pyinfra', 'paramiko')}, "
        "'python': sys.version.split()[0]}))"
    )
    peers = json.loads(subprocess.run([str(bin_dir / "python"), "-c", script], capture_output=True, text=True,
                                      check=True).stdout)
    ours = {p: metadata.version(p) for p in ("gpunode", "fabric", "paramiko")}
    openssh = subprocess.run(["ssh", "-V"], capture_output=True, text=True).stderr.strip()
    return {"ansible-core": peers["ansible-core"], "pyinfra": peers["pyinfra"],
            "pyinfra paramiko": peers["paramiko"], "gpunode": ours["gpunode"], "gpunode fabric": ours["fabric"],
            "gpunode paramiko": ours["paramiko"], "openssh client (ansible)": openssh,
            "python": sys.version.split()[0], "peers python": peers["python"]}


def plotting_python(bin_dir: Path) -> Path | None:
    """A python that has matplotlib (the peers' venv), or None."""
    python = bin_dir / "python"
    ok = subprocess.run([str(python), "-c", "import matplotlib"], capture_output=True).returncode == 0
    return python if ok else None
