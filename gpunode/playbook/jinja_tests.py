"""Ansible's Jinja tests (ansible/ansible lib/ansible/plugins/test/core.py): `version` (`version_compare`) and the
tests of a registered result: `failed`, `succeeded`/`success`, `changed`, `skipped`."""

from __future__ import annotations

import operator as py_operator
import re
from collections.abc import Callable, Mapping
from typing import Any

from gpunode.playbook.filters import FilterError

OPERATORS = {"==": "eq", "=": "eq", "eq": "eq", "<": "lt", "lt": "lt", "<=": "le", "le": "le", ">": "gt", "gt": "gt",
             ">=": "ge", "ge": "ge", "!=": "ne", "<>": "ne", "ne": "ne"}
_LOOSE = re.compile(r"(\d+|[a-z]+|\.)", re.I)
_STRICT = re.compile(r"^(\d+)\.(\d+)(\.(\d+))?([ab](\d+))?$", re.ASCII)
_SEMVER = re.compile(r"^(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$")


def loose_version(text: str) -> list[int | str]:
    """distutils' LooseVersion: runs of digits (as numbers) and of letters, dots dropped."""
    parts = [p for p in _LOOSE.split(text) if p and p != "."]
    return [int(p) if p.isdigit() else p for p in parts]


def strict_version(text: str) -> tuple:
    """distutils' StrictVersion: N.N[.N][(a|b)N]; a release sorts after its pre-releases."""
    match = _STRICT.match(text)
    if not match:
        raise ValueError(f"invalid version number '{text}'")
    major, minor, _, patch, pre, pre_num = match.groups()
    core = (int(major), int(minor), int(patch or 0))
    return (core, (1,) if not pre else (0, pre[0], int(pre_num)))


def semantic_version(text: str) -> tuple:
    """Semantic Versioning 2.0.0 precedence: build metadata ignored, a release after its pre-releases."""
    match = _SEMVER.match(text)
    if not match:
        raise ValueError(f"invalid semantic version '{text}'")
    core = tuple(int(x) for x in match.group(1, 2, 3))
    pre = match.group(4)
    if pre is None:
        return (core, (1,))
    ids = tuple((0, int(i), "") if i.isdigit() else (1, 0, i) for i in pre.split("."))
    return (core, (0, ids))


def pep440_version(text: str) -> Any:
    """PEP 440 (Python packaging's Version), when the `packaging` library is installed (as in Ansible)."""
    try:
        from packaging.version import Version
    except ImportError:
        raise FilterError("The pep440 version_type requires the Python 'packaging' library") from None
    return Version(text)


VERSION_TYPES: dict[str, Callable[[str], Any]] = {"loose": loose_version, "strict": strict_version,
                                                  "semver": semantic_version, "semantic": semantic_version,
                                                  "pep440": pep440_version}


def version_compare(value: Any, version: Any, operator: str = "eq", strict: bool | None = None,
                    version_type: str | None = None) -> bool:
    """`x is version('1.2', '>=')`: loose versions unless `strict=true` or `version_type=` says otherwise."""
    if strict is not None and version_type is not None:
        raise FilterError("Cannot specify both 'strict' and 'version_type'")
    if not value:
        raise FilterError("Input version value cannot be empty")
    if not version:
        raise FilterError("Version parameter to compare against cannot be empty")
    parse = strict_version if strict else VERSION_TYPES.get(version_type or "loose")
    if parse is None:
        raise FilterError(f"Invalid version type ({version_type}). Must be one of "
                          f"{', '.join(map(repr, VERSION_TYPES))}")
    if operator not in OPERATORS:
        raise FilterError(f"Invalid operator type ({operator}). Must be one of "
                          f"{', '.join(map(repr, OPERATORS))}")
    try:
        return getattr(py_operator, OPERATORS[operator])(parse(str(value)), parse(str(version)))
    except FilterError:
        raise
    except (TypeError, ValueError) as exc:  # packaging's InvalidVersion is a ValueError
        raise FilterError(f"Version comparison failed: {exc}") from None


def _result(value: Any, test: str) -> Mapping:
    if not isinstance(value, Mapping):
        raise FilterError(f"The {test} test expects a dictionary (a registered result)")
    return value


def failed(value: Any) -> bool:
    return bool(_result(value, "failed").get("failed", False))


def succeeded(value: Any) -> bool:
    return not _result(value, "succeeded").get("failed", False)


def changed(value: Any) -> bool:
    return bool(_result(value, "changed").get("changed", False))


def skipped(value: Any) -> bool:
    return bool(_result(value, "skipped").get("skipped", False))


TESTS: dict[str, Callable[..., bool]] = {
    "version": version_compare, "version_compare": version_compare, "failed": failed, "failure": failed,
    "succeeded": succeeded, "success": succeeded, "successful": succeeded, "changed": changed, "change": changed,
    "skipped": skipped, "skip": skipped,
}
