"""Rolling runs: the hosts in batches (Ansible's play keys `serial` and `max_fail_percentage`), the next batch only
when this one did not fail too much, so that a bad driver or kernel change stops at its first batch.

Ansible's semantics (ansible/ansible lib/ansible/executor/playbook_executor.py, `_get_serialized_batches` and the
batch loop of `run`, read at 0545525c; the list form and its repeated last size from
docs/docsite/rst/playbook_guide/playbooks_strategies.rst): a percentage is of all the play's hosts, rounded down
but at least 1; a list's last size repeats for the hosts left; after a batch, the rollout stops when the failed
(or unreachable) share of that batch exceeds `max_fail_percentage`, or, without it, when every host of the batch
failed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")
_SIZE = re.compile(r"(\d+)(%?)")


@dataclass(frozen=True)
class Rollout:
    """Batch sizes as written (an int, or "N%"; empty: all hosts at once) and the failure share that stops it."""

    serial: tuple[str, ...] = ()
    max_fail_percentage: float | None = None

    @classmethod
    def parse(cls, serial: Any, max_fail_percentage: Any) -> Rollout:
        """From the playbook's values; ValueError says what is wrong."""
        sizes = serial if isinstance(serial, list) else [] if serial in (None, "") else [serial]
        written = tuple(str(size).strip() for size in sizes)
        for size in written:
            match = _SIZE.fullmatch(size)
            if not match or int(match.group(1)) == 0:
                raise ValueError(f"serial: {size!r} is not a batch size (a number of hosts, or a percentage "
                                 "such as 25%, above 0)")
        if max_fail_percentage is None:
            return cls(written)
        if isinstance(max_fail_percentage, bool) or not isinstance(max_fail_percentage, (int, float)) or \
                not 0 <= max_fail_percentage <= 100:
            raise ValueError(f"max_fail_percentage: {max_fail_percentage!r} is not a percentage from 0 to 100")
        return cls(written, float(max_fail_percentage))

    def batches(self, hosts: Sequence[T]) -> list[list[T]]:
        """`hosts` in order, cut into the batches."""
        if not self.serial:
            return [list(hosts)] if hosts else []
        left, batches, index = list(hosts), [], 0
        while left:
            size = _count(self.serial[min(index, len(self.serial) - 1)], len(hosts))
            batches.append(left[:size])
            left, index = left[size:], index + 1
        return batches

    def stops_after(self, failed: int, size: int) -> bool:
        """Whether a batch of `size` hosts of which `failed` failed stops the rollout."""
        if self.max_fail_percentage is not None:
            return failed * 100 / size > self.max_fail_percentage
        return failed == size


def _count(size: str, total: int) -> int:
    number, percent = _SIZE.fullmatch(size).groups()  # type: ignore[union-attr]  # checked by parse
    return max(1, int(number) * total // 100) if percent else int(number)
