"""Version lines of container tools: `containerd --version`, `dockerd --version`, `nvidia-ctk --version`."""

from __future__ import annotations

import re


def containerd_version(text: str | None) -> str | None:
    """The version of `containerd --version` (`containerd github.com/containerd/containerd 1.6.20~ds1 ...`,
    `containerd containerd.io v1.7.27 05044ec...`): the first x.y.z word, without its `v`; None if there is none."""
    match = re.search(r"\bv?(\d+\.\d+\.\d+[\w.+~-]*)", text or "")
    return match.group(1) if match else None


def containerd_major(text: str | None) -> int:
    """containerd's major version from `containerd --version` (`containerd github.com/... v2.1.4 ...`); 1 when the
    line names none."""
    for word in (text or "").split()[1:]:
        match = re.match(r"v?(\d+)\.\d+", word)
        if match:
            return int(match.group(1))
    return 1


def dockerd_version(text: str | None) -> str | None:
    """The version of `dockerd --version` (`Docker version 20.10.24+dfsg1, build 5d6db84`, the comma left out)."""
    match = re.search(r"version\s+v?([0-9][\w.+~-]*)", text or "")
    return match.group(1) if match else None


def toolkit_version(text: str | None) -> tuple[int, ...]:
    """(major, minor) of `nvidia-ctk --version` (`NVIDIA Container Toolkit CLI version 1.17.8`); (0,) if unknown."""
    match = re.search(r"version (\d+)\.(\d+)", text or "")
    return (int(match.group(1)), int(match.group(2))) if match else (0,)
