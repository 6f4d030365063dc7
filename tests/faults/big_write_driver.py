"""Run one `file` step with a big content on one host, in-process (a playbook this big would be slow YAML).

Usage: python tests/faults/big_write_driver.py INVENTORY PATH BYTES REPORT
Ctrl-C (SIGINT) goes through the same path as `gpunode provision`: run_playbook cancels and closes connections.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from gpunode.connection import ConnectOptions
from gpunode.inventory import load_inventory
from gpunode.playbook import Playbook
from gpunode.playbook.load import StepSpec
from gpunode.runner.run import RunOptions, run_playbook

LINE = "line {:09d} of the new content\n"  # 32 bytes


def big_content(size: int) -> str:
    return "".join(LINE.format(i) for i in range(size // len(LINE.format(0))))


def main(inventory: str, path: str, size: int, report: str) -> int:
    spec = StepSpec("file", {"path": path, "content": big_content(size)}, "big write", None, [], "driver", 1)
    hosts = list(load_inventory(inventory).hosts.values())
    result = run_playbook(Playbook("driver", "driver", None, {}, [spec]), hosts, RunOptions(connect=ConnectOptions()))
    Path(report).write_text(json.dumps(result.to_dict()))
    return result.exit_code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]))
