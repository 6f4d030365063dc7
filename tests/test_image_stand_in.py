"""Image tags stay honest when a lab host stands in for the instance (dev/demo: an al2023 source AMI in moto, a
Debian 12 lab host provisioned): `gpunode:base` names the base as the source only and says what was provisioned."""

from __future__ import annotations

import pytest

from gpunode.image.tags import honest_base, stand_in


@pytest.mark.parametrize(("base", "os_id", "expected"), [
    ("al2023", "debian-12", True),            # the demo
    ("al2023-ecs-gpu", "amzn-2023", False),   # the real thing
    ("debian-12", "debian-12", False),
    ("debian-12", "debian-13", True),         # another release of the same distro
    ("ubuntu-22.04", "ubuntu-22.04", False),
    ("ubuntu-24.04", "debian-12", True),
    ("alinux-3", "alinux-3", False),
    ("ami-0123456789abcdef0", "debian-12", False),  # bake: the base is the source AMI id, nothing to compare
    ("al2023", "", False),                    # no inspection: nothing claimed
])
def test_stand_in(base: str, os_id: str, expected: bool) -> None:
    assert stand_in(base, os_id) is expected


def test_the_demos_tags_say_the_stand_in() -> None:
    tags = honest_base({"gpunode:base": "al2023", "gpunode:os": "debian-12", "gpunode:driver": "none"})
    assert tags == {"gpunode:base": "al2023 (source AMI; provisioned: debian-12, a stand-in)",
                    "gpunode:os": "debian-12", "gpunode:driver": "none", "gpunode:stand-in": "true"}
    real = {"gpunode:base": "al2023-ecs-gpu", "gpunode:os": "amzn-2023"}
    assert honest_base(real) == real  # a real bake keeps its tags
