"""Every distro fact lives in a distro adapter: no distro id outside gpunode/distros/.

The same search as `grep -rnwE 'debian|ubuntu|rhel|amzn|alinux|tencentos' gpunode scripts playbooks packer
--include=*.py --include=*.sh --include=*.yml --include=*.hcl` (whole words, lowercase ids as os-release spells
them, symbolic links not followed),
done in Python so that it fails with file:line of each hit.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "gpunode"
ADAPTERS = PACKAGE / "distros"
IDS = re.compile(r"(?<![\w])(debian|ubuntu|rhel|amzn|alinux|tencentos)(?![\w])")
SUFFIXES = (".py", ".sh", ".yml", ".hcl")


def _files(top: Path) -> list[Path]:
    found = []
    for folder, dirs, names in os.walk(top):  # like grep -r: symbolic links to folders are not followed
        dirs.sort()
        found += [Path(folder) / n for n in sorted(names) if n.endswith(SUFFIXES)
                  and not (Path(folder) / n).is_symlink()]
    return found


def distro_id_hits(top: Path = PACKAGE, allowed: Path = ADAPTERS, root: Path = ROOT) -> list[str]:
    """`path:line: text` (path relative to `root`) of every distro id under `top` outside `allowed`."""
    hits = []
    for path in _files(top):
        if path.is_relative_to(allowed):
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if IDS.search(line):
                hits.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    return hits


# What ships in the wheel besides gpunode/ (gpunode/_scripts, _playbooks and _packer link to these folders).
SHIPPED = ("scripts", "playbooks", "packer")


def test_no_distro_id_outside_the_adapters() -> None:
    hits = distro_id_hits() + [hit for folder in SHIPPED for hit in distro_id_hits(ROOT / folder)]
    assert not hits, "distro ids outside gpunode/distros/ (ask the adapter instead):\n" + "\n".join(hits)


def test_the_search_finds_what_grep_finds(tmp_path: Path) -> None:
    (tmp_path / "pkg" / "distros").mkdir(parents=True)
    (tmp_path / "pkg" / "a.py").write_text('x = 1\nif os.id == "debian":\n    y = "ubuntu22.04"  # not a word\n')
    (tmp_path / "pkg" / "b.sh").write_text('[ "$family" = rhel ]\n')
    (tmp_path / "pkg" / "c.txt").write_text("amzn\n")
    (tmp_path / "pkg" / "distros" / "d.py").write_text('ID = "alinux"\n')
    hits = [h.split(":", 2)[:2] for h in distro_id_hits(tmp_path / "pkg", tmp_path / "pkg" / "distros", tmp_path)]
    assert hits == [["pkg/a.py", "2"], ["pkg/b.sh", "1"]]

