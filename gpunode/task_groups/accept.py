"""The acceptance task: `gpunode accept` runs a tier (quick, standard, burn-in) on hosts under a time budget."""

from __future__ import annotations

from invoke.exceptions import Exit

from gpunode.commands.common import cli_errors
from gpunode.errors import UsageError
from gpunode.task_groups.base import CONN_HELP, KEYS_HELP, _positive, _whole, gtask

_MAX_BUDGET_S = 1e7  # about 115 days: anything longer is a typo


def _budget(value: object) -> float | None:
    """--budget: seconds, more than 0 (None when not given)."""
    if value is None or value == "":
        return None
    try:
        number = float(str(value))
    except ValueError:
        number = -1.0
    if not 0 < number < _MAX_BUDGET_S:
        raise UsageError(f"must be a number of seconds above 0 and below {_MAX_BUDGET_S:.0f}, got {value!r}",
                         source="--budget",
                         fix="e.g. --budget 60 (the quick tier's default; standard 1200, burn-in 10800)")
    return number


@gtask(positional=["target"], iterable=["inventory"], help={
    "target": "host(s): a pattern of the inventory given with -i, else ad-hoc host1,user@host2",
    "inventory": CONN_HELP["inventory"], **KEYS_HELP,
    "tier": "quick (default: passive checks, a CUDA kernel on every GPU, DCGM level 1; about a minute), standard "
            "(adds DCGM level 2, copy bandwidth per GPU and pair, NCCL all_reduce) or burn-in (DCGM levels 3/4, "
            "longer probe loops)",
    "budget": "seconds the tier may take on each host (default: quick 60, standard 1200, burn-in 10800); a check "
              "that would not fit is not started and the tier says so",
    "expect_gpus": "expected GPU count (default: inventory var expect_gpus)",
    "expect_model": "expected GPU model, e.g. H100: the references the measurements are compared with (default: "
                    "inventory var expect_model, else the GPU's name)",
    "forks": "hosts in parallel (default 10)",
    "json": "print the JSON report (the node's raw tool outputs included)", "junit": "write JUnit XML here",
})
def accept(c, target, inventory=None, tier="quick", budget=None, expect_gpus=None, expect_model=None, forks=10,
           json=False, junit=None, accept_new_host_keys=False):
    """Prove nodes fit to take GPU jobs: an acceptance tier under a time budget; exit 0 pass, 1 fail/incomplete."""
    from gpunode.accept.node import AcceptRequest
    from gpunode.commands.accept_cmd import accept as run
    from gpunode.commands.accept_cmd import check_request

    with cli_errors():
        checked = check_request(str(tier), _budget(budget))
        request = AcceptRequest(checked.tier, checked.budget, _whole("--expect-gpus", expect_gpus), expect_model)
        code = run(inventory or [], target, request, _positive("--forks", forks, 1000), json, junit,
                   accept_new_host_keys)
    if code:
        raise Exit(code=code)
