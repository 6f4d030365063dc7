"""Time parse_smi_xml on every XML capture: best of N runs, in milliseconds per file.

Usage: python bench/bench_parse.py [--repeat N] [FIXTURE_DIR]
Prints one line per file and asserts nothing (the target is < 50 ms per capture).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gpunode.parsers.smi_xml import parse_smi_xml  # noqa: E402

DEFAULT_DIR = REPO / "tests" / "data" / "nvidia" / "xml"
TARGET_MS = 50.0


def best_ms(text: str, repeat: int) -> float:
    """Fastest of `repeat` parses, in milliseconds."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        parse_smi_xml(text)
        best = min(best, time.perf_counter() - start)
    return best * 1000


def run(directory: Path, repeat: int) -> list[tuple[str, int, float]]:
    """(file name, size in bytes, best ms) for every *.xml in directory."""
    results = []
    for path in sorted(directory.glob("*.xml")):
        text = path.read_text(encoding="utf-8")
        results.append((path.name, len(text.encode()), best_ms(text, repeat)))
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", nargs="?", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args(argv)
    if not args.directory.is_dir():
        print(f"no fixture directory at {args.directory}", file=sys.stderr)
        return 2
    results = run(args.directory, args.repeat)
    width = max((len(name) for name, _, _ in results), default=10)
    for name, size, ms in results:
        flag = "" if ms < TARGET_MS else f"  (over the {TARGET_MS:.0f} ms target)"
        print(f"{name:<{width}}  {size / 1024:7.1f} KiB  {ms:8.3f} ms{flag}")
    if results:
        slowest = max(ms for _, _, ms in results)
        print(f"{'slowest':<{width}}  {'':11}  {slowest:8.3f} ms  (best of {args.repeat})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
