"""The peer tools (ansible-core, pyinfra) live in their own venv, never in gpunode's environment."""

from __future__ import annotations

import importlib.metadata as metadata
import json
import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
DEFAULT_VENV = BENCH / ".venv-peers"
PEER_PACKAGES = ["ansible-core", "pyinfra", "matplotlib"]  # matplotlib only for the optional plot


def peer_venv() -> Path:
    """The venv's folder: $GPUNODE_BENCH_VENV or bench/.venv-peers."""
    return Path(os.environ.get("GPUNODE_BENCH_VENV", DEFAULT_VENV))


def ensure_peers(venv: Path | None = None) -> Path:
    """Create the venv and install the peers from PyPI when they are missing; returns its bin/ folder."""
    venv = venv or peer_venv()
    bin_dir = venv / "bin"
    if not (bin_dir / "ansible-playbook").exists() or not (bin_dir / "pyinfra").exists():
        print(f"installing {', '.join(PEER_PACKAGES)} into {venv} (once)", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(bin_dir / "pip"), "install", "-q", *PEER_PACKAGES], check=True)
    return bin_dir


def versions(bin_dir: Path) -> dict[str, str]:
    """Installed versions of the peers (and of gpunode and its SSH stack), for the results."""
    script = (
        "import importlib.metadata as m, json; "
        "print(json.dumps({p: m.version(p) for p in ('ansible-core', 'pyinfra', 'paramiko')}))"
    )
    peers = json.loads(subprocess.run([str(bin_dir / "python"), "-c", script], capture_output=True, text=True,
                                      check=True).stdout)
    ours = {p: metadata.version(p) for p in ("gpunode", "fabric", "paramiko")}
    openssh = subprocess.run(["ssh", "-V"], capture_output=True, text=True).stderr.strip()
    return {"ansible-core": peers["ansible-core"], "pyinfra": peers["pyinfra"],
            "pyinfra paramiko": peers["paramiko"], "gpunode": ours["gpunode"], "gpunode fabric": ours["fabric"],
            "gpunode paramiko": ours["paramiko"], "openssh client (ansible)": openssh,
            "python": sys.version.split()[0]}


def plotting_python(bin_dir: Path) -> Path | None:
    """A python that has matplotlib (the peers' venv), or None."""
    python = bin_dir / "python"
    ok = subprocess.run([str(python), "-c", "import matplotlib"], capture_output=True).returncode == 0
    return python if ok else None
