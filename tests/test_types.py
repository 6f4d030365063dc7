"""The type checker's ratchet (issue 41): mypy at its default settings over gpunode/, with today's errors per file as
a baseline (tests/data/mypy_baseline.txt) that may only shrink. A file with more errors than its baseline fails the
test, naming the new errors; a file with fewer asks for the baseline to be lowered, so the gain is kept."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter

from tests.conftest import REPO

BASELINE = REPO / "tests" / "data" / "mypy_baseline.txt"
ERROR = re.compile(r"^(?P<path>[^:\s]+\.py):\d+: error: ")


def baseline() -> Counter[str]:
    """The baseline: `path count` lines; # comments."""
    counts: Counter[str] = Counter()
    for line in BASELINE.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            path, count = line.split()
            counts[path] = int(count)
    return counts


def test_mypy_errors_only_shrink():
    result = subprocess.run([sys.executable, "-m", "mypy", "gpunode"], cwd=REPO, capture_output=True, text=True,
                            timeout=600)
    errors = [line for line in result.stdout.splitlines() if ERROR.match(line)]
    assert errors or result.returncode == 0, result.stdout + result.stderr  # mypy ran (a crash prints no errors)
    now = Counter(ERROR.match(line)["path"] for line in errors)
    allowed = baseline()
    worse = {path: (count, allowed[path]) for path, count in now.items() if count > allowed[path]}
    new = [line for line in errors if ERROR.match(line)["path"] in worse]
    assert not worse, "new mypy errors (fix them; the baseline only shrinks):\n" + "\n".join(new)
    better = {path: (now[path], count) for path, count in allowed.items() if now[path] < count}
    assert not better, (f"fewer mypy errors than the baseline in {sorted(better)}: lower "
                        f"{BASELINE.relative_to(REPO)} to (now, was) {better}")
