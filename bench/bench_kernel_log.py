"""Time `diagnose` on a large kernel log built from real captures repeated (default ~20 MB).

Usage: python bench/bench_kernel_log.py [--mb 20] [CAPTURE...]
Prints the size, wall and CPU seconds of diagnose_files() and the findings; asserts nothing (target: < 10 s).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gpunode.verify import diagnose_files  # noqa: E402

CAPTURES = [REPO / "tests/data/captures/dmesg/gpud__dmesg-with-xid-119.log",
            REPO / "tests/data/captures/dmesg/gpud__dmesg.txt"]


def build(captures: list[Path], megabytes: float) -> str:
    """The captures concatenated, repeated to about `megabytes` MB."""
    text = "".join(path.read_text().rstrip("\n") + "\n" for path in captures)
    return text * (int(megabytes * 1_000_000) // len(text) + 1)


def main() -> None:
    """Build the log, diagnose it once, print the timings."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=20.0)
    parser.add_argument("captures", nargs="*", type=Path, default=CAPTURES)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "big.log"
        log.write_text(build(args.captures, args.mb))
        wall, cpu = time.perf_counter(), time.process_time()
        result = diagnose_files([log])
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        print(f"{log.stat().st_size / 1e6:.1f} MB: wall {wall:.2f} s, CPU {cpu:.2f} s; "
              f"findings: {', '.join(f.id for f in result.findings) or 'none'}")


if __name__ == "__main__":
    main()
