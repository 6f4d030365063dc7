"""Rolling runs: the hosts in batches (Ansible's play keys `serial` and `max_fail_percentage`), the next batch only
when this one did not fail too much, so that a bad driver or kernel change stops at its first batch.

Ansible's semantics (ansible/ansible lib/ansible/executor/playbook_executor.py, `_get_serialized_batches` and the
batch loop of `run`, read at 0545525c; the list form and its repeated last size from
docs/docsite/rst/playbook_guide/playbooks_strategies.rst): a percentage is of all the play's hosts, rounded down
but at least 1; a list's last size repeats for the hosts left; after a batch, the rollout stops when the failed
(or unreachable) share of that batch exceeds `max_fail_percentage`, or, without it, when every host of the batch
failed.

gpunode's own keys for GPU fleets (docs/playbook-language.md): `canary` (a first batch of that many hosts, every one
of which must pass, gate included, before any other host is touched), `drain` (`auto`: a host whose run is about to
make a change that disturbs its GPUs is first taken out of its scheduler, waiting for its running work to end, and
put back after its gate passed; `never`), `drain_timeout` (seconds to wait for that work) and `rollback` (a host
whose change or gate failed gets back the NVIDIA packages it held before).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

T = TypeVar("T")
DEFAULT_DRAIN_TIMEOUT = 3600.0  # seconds a drain waits for the node's running work (drain_timeout)
_SIZE = re.compile(r"(\d+)(%?)")


@dataclass(frozen=True)
class Rollout:
    """Batch sizes as written (an int, or "N%"; empty: all hosts at once) and the failure share that stops it."""

    serial: tuple[str, ...] = ()
    max_fail_percentage: float | None = None
    canary: int = 0                # hosts in a first batch that must all pass (0: none)
    drain: str = "auto"            # auto | never
    drain_timeout: float = DEFAULT_DRAIN_TIMEOUT
    rollback: bool = True

    @classmethod
    def from_play(cls, play: dict[str, Any]) -> Rollout:
        """From the play's keys; ValueError says what is wrong, naming the key first."""
        rollout = cls.parse(play.get("serial"), play.get("max_fail_percentage"))
        canary = play.get("canary", 0)
        if isinstance(canary, bool) or not isinstance(canary, int) or canary < 0:
            raise ValueError(f"canary: {canary!r} is not a number of hosts (0 or more)")
        drain = play.get("drain", "auto")
        if drain not in ("auto", "never"):
            raise ValueError(f"drain: {drain!r} is not auto or never")
        timeout = play.get("drain_timeout", DEFAULT_DRAIN_TIMEOUT)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ValueError(f"drain_timeout: {timeout!r} is not a number of seconds above 0")
        rollback = play.get("rollback", True)
        if not isinstance(rollback, bool):
            raise ValueError(f"rollback: {rollback!r} is not true or false")
        return replace(rollout, canary=canary, drain=drain, drain_timeout=float(timeout), rollback=rollback)

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

    @property
    def rolling(self) -> bool:
        """Whether hosts go in more than one batch (or a canary first)."""
        return bool(self.serial or self.canary)

    def batches(self, hosts: Sequence[T]) -> list[list[T]]:
        """`hosts` in order, cut into the batches (the canary first)."""
        first = [list(hosts[:self.canary])] if self.canary and hosts else []
        rest = list(hosts[self.canary:])
        if not self.serial:
            return first + ([rest] if rest else [])
        left, batches, index = rest, first, 0
        while left:
            size = _count(self.serial[min(index, len(self.serial) - 1)], len(hosts))
            batches.append(left[:size])
            left, index = left[size:], index + 1
        return batches

    def stops_after(self, failed: int, size: int, number: int = 2) -> bool:
        """Whether batch `number` (from 1) of `size` hosts, of which `failed` failed, stops the rollout; a canary
        batch stops it at its first failure."""
        if number == 1 and self.canary and failed:
            return True
        if self.max_fail_percentage is not None:
            return failed * 100 / size > self.max_fail_percentage
        return failed == size


def _count(size: str, total: int) -> int:
    number, percent = _SIZE.fullmatch(size).groups()  # type: ignore[union-attr]  # checked by parse
    return max(1, int(number) * total // 100) if percent else int(number)
