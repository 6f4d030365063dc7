"""A run cut short during the driver's install leaves gpunode's pause of DKMS autoinstall behind; the next run knows
the file as gpunode's and removes it, and a user's own file stays (issue 37: later runs took the leftover for the
user's, so Debian's DKMS kernel hook stayed off for good and the next kernel came without a module).

The install command gpunode plans (`cached_install`, the module cache's path on apt) runs on a lab host through bash
with its install replaced by what a power cut does to it: the shell dies by SIGKILL, so its EXIT trap never runs.
The next run's probe section (`PAUSE_PROBE`) runs on the same host, the planner reads its answer, and the planned
action runs there. Guards: gpunode/steps/nvidia_cache.py `cached_install`, `left_pause_actions`.
"""

from __future__ import annotations

import pytest

from gpunode.connection import q
from gpunode.steps.base import Action
from gpunode.steps.nvidia_cache import (
    NO_AUTOINSTALL,
    NO_AUTOINSTALL_MARK,
    PAUSE_PROBE,
    cached_install,
    left_pause_actions,
)

pytestmark = pytest.mark.lab


def _install_with(fresh_host, body: str) -> int:
    """gpunode's install command around `body` (the driver packages' install), run through bash on the host."""
    action = cached_install(Action("install the driver", "", body), True, "nvidia-kernel-dkms", "proprietary")
    assert action.command is not None and body in action.command
    return fresh_host.run_inside(f"bash -c {q(action.command)}").returncode


def _next_run(fresh_host) -> list[Action]:
    return left_pause_actions(fresh_host.run_inside(PAUSE_PROBE).stdout)


def test_a_pause_left_by_a_cut_run_is_removed_by_the_next(lab, fresh_host):
    assert _install_with(fresh_host, "kill -KILL $$") == 137  # a power cut: no trap runs
    left = fresh_host.run_inside(f"cat {NO_AUTOINSTALL}")
    assert left.returncode == 0 and left.stdout.splitlines() == [NO_AUTOINSTALL_MARK]
    (remove,) = _next_run(fresh_host)
    assert remove.summary == f"remove {NO_AUTOINSTALL}" and "next kernel gets no NVIDIA module" in remove.reason
    assert remove.command is not None and fresh_host.run_inside(f"bash -c {q(remove.command)}").returncode == 0
    assert fresh_host.run_inside(f"test -e {NO_AUTOINSTALL}").returncode == 1
    assert _next_run(fresh_host) == []  # converged: a third run plans nothing

    # the cut run's leftover is taken as gpunode's by the next install too, and removed when it ends
    _install_with(fresh_host, "kill -KILL $$")
    assert _install_with(fresh_host, "test -s /etc/dkms/no-autoinstall") == 0  # paused during the install
    assert fresh_host.run_inside(f"test -e {NO_AUTOINSTALL}").returncode == 1


def test_the_users_own_pause_stays(lab, fresh_host):
    assert fresh_host.run_inside(f"mkdir -p /etc/dkms && echo 'kept by ops: no builds here' > {NO_AUTOINSTALL}"
                                 ).returncode == 0
    assert _install_with(fresh_host, "true") == 0
    assert _install_with(fresh_host, "kill -KILL $$") == 137
    assert fresh_host.run_inside(f"cat {NO_AUTOINSTALL}").stdout == "kept by ops: no builds here\n"
    assert _next_run(fresh_host) == []
