"""Two labs on one subnet: the second is refused (exit 2) instead of sending connections to the first lab's hosts
(measured before the fix: `facts` on the second lab's host reached the first lab's host, "host key changed").
Guards: gpunode/lab/network.py `check_subnet_free`."""

from __future__ import annotations

import pytest

from gpunode.lab.lab import Lab, lab_root
from tests.conftest import LAB_SUBNET, LAB_TAG, run_cli

pytestmark = pytest.mark.lab


def test_a_second_lab_on_a_used_subnet_is_refused(lab):
    other = LAB_TAG[:5] + "z"
    if (lab_root() / other / "state.json").exists():  # a lab's down() keeps its folder (lock, key); state is a live lab
        pytest.skip(f"a lab named {other} runs here; not touching it")
    try:
        result = run_cli("lab-up", "--tag", other, "--subnet", LAB_SUBNET, "--hosts", "1")
        assert result.code == 2, result.output
        assert f"subnet {LAB_SUBNET} is already used by {lab.network.bridge}" in result.stderr
        assert "--subnet" in result.stderr and "Traceback" not in result.output
        assert not (lab_root() / other / "hosts").exists()
    finally:
        Lab(other, LAB_SUBNET).down()
