"""Run a seed page's commands (docs/seeds/, the block after `<!-- seed-commands -->`) as written, offline: each
`gpunode ... > FILE` through the CLI into a temporary folder, and `kubectl apply -f ...` read for the files it
applies; every file then goes through kubernetes-validate --strict for each Kubernetes version given."""

from __future__ import annotations

import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

from tests.conftest import REPO, run_cli
from tests.test_kube_manifests import VALIDATOR

MARKER = "<!-- seed-commands -->"


def page_commands(page: str) -> list[list[str]]:
    """The commands of the page's marked ```sh block, continuation lines joined, split as a shell would."""
    text = (REPO / "docs" / "seeds" / page).read_text()
    found = re.search(re.escape(MARKER) + r"\s*```sh\n(.*?)\n```", text, re.S)
    assert found, f"{page}: no ```sh block after {MARKER}"
    return [shlex.split(line) for line in found.group(1).replace("\\\n", " ").splitlines() if line.strip()]


@dataclass
class SeedRun:
    files: dict[str, list[dict]]   # file name -> its documents, in the order written
    applied: list[str]             # the files `kubectl apply -f` names, in order


def run_page(page: str, folder: Path, versions: tuple[str, ...]) -> SeedRun:
    """Run the page's gpunode commands, check what each writes, and read its kubectl line."""
    files: dict[str, list[dict]] = {}
    applied: list[str] = []
    for words in page_commands(page):
        if words[0] == "kubectl":
            assert words[1] == "apply", words
            applied = [words[i + 1] for i, word in enumerate(words) if word == "-f"]
            continue
        assert words[0] == "gpunode" and words[-2] == ">", f"{page}: not `gpunode ... > FILE`: {words}"
        result = run_cli(*words[1:-2])
        assert result.code == 0, f"{page}: {' '.join(words)}\n{result.output}"
        target = folder / words[-1]
        target.write_text(result.stdout)
        for version in versions:
            checked = subprocess.run([str(VALIDATOR), "--strict", "-k", version, str(target)], capture_output=True,
                                     text=True)
            assert checked.returncode == 0, f"{page}: {target.name} on {version}\n{checked.stdout}{checked.stderr}"
            assert checked.stdout.count("passed") == len(list(yaml.safe_load_all(result.stdout)))
        files[words[-1]] = list(yaml.safe_load_all(result.stdout))
    return SeedRun(files, applied)


def claim_of(pod_or_job: dict) -> tuple[str, str]:
    """(namespace, claim name) the training pod mounts."""
    spec = pod_or_job["spec"]["template"]["spec"] if pod_or_job["kind"] == "Job" else pod_or_job["spec"]
    (volume,) = spec["volumes"]
    return pod_or_job["metadata"]["namespace"], volume["persistentVolumeClaim"]["claimName"]
