"""Which Python the first-boot script may run the bundle with, and the bash that finds (or installs) it.

A node's plain `python3` is often not one gpunode can use: AL2023's `/usr/bin/python3` stays 3.9 for the life of
the release, and its newer Pythons are separate packages with versioned names (`python3.11`, ...: see the
"al2023-python" fact table). So the script tries the versioned names before `python3`, checks each one's version,
installs the needed one from the distro (dnf/yum/apt) when none fits, and otherwise stops with NO_PYTHON_EXIT and a
message naming the version it needs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from gpunode.vendor_facts import Fact, Source, fact_table

NO_PYTHON_EXIT = 3  # the script's exit code when no usable interpreter is there or can be installed
NEWEST_MINOR = 14   # the newest python3.N name tried when any version from the minimum up will do
_VERSIONED_SO = re.compile(r"\.cpython-3(\d+)[-\w]*\.so$")

_AL2023_PYTHON = "https://docs.amazonaws.cn/en_us/linux/al2023/ug/python.md"  # AWS's "Python in AL2023"
AL2023_PYTHON = fact_table("al2023-python", {
    "system_python": Fact("3.9", Source(url=_AL2023_PYTHON), note="/usr/bin/python3 is Python 3.9 and stays 3.9 for "
                          "the life of AL2023; the page says not to repoint the symlink"),
    "newer_pythons": Fact(("3.11", "3.12", "3.13", "3.14"), Source(url=_AL2023_PYTHON),
                          note="newer Pythons are provided as separate, version-namespaced packages"),
    "versioned_binary": Fact("/usr/bin/python3.{minor}", Source(url=_AL2023_PYTHON),
                             note="with python3.11 installed, /usr/bin/python3.11 exists beside python3.9"),
    "package_name": Fact("python3.{minor}", Source(url=_AL2023_PYTHON),
                         note="the page's example installs the python3.11 package (dnf)"),
})


def minimum() -> tuple[int, int]:
    """gpunode's own floor (pyproject's requires-python)."""
    return (3, 11)


def bundle_python(names: Iterable[str]) -> tuple[int, int] | None:
    """The one Python minor version the bundle's compiled extensions need (`*.cpython-311-*.so`), or None when every
    extension is abi3 (any version from the minimum up runs it)."""
    minors = {int(m.group(1)) for name in names if (m := _VERSIONED_SO.search(name))}
    if len(minors) > 1:
        raise ValueError(f"the bundle mixes extensions for several Pythons: {sorted(minors)}")
    return (3, minors.pop()) if minors else None


def candidates(exact: tuple[int, int] | None) -> list[str]:
    """Interpreter names to try, best first; plain python3 last."""
    if exact:
        return [f"python{exact[0]}.{exact[1]}", "python3"]
    low = minimum()[1]
    return [f"python3.{minor}" for minor in range(NEWEST_MINOR, low - 1, -1)] + ["python3"]


def wanted(exact: tuple[int, int] | None) -> str:
    """The requirement in words: "3.11" or "3.11 or newer"."""
    if exact:
        return f"{exact[0]}.{exact[1]}"
    return f"{minimum()[0]}.{minimum()[1]} or newer"


def finder_script(exact: tuple[int, int] | None) -> str:
    """Bash defining `find_python` (sets $py to a usable interpreter's path) and `install_python` (the distro's
    package for it: dnf, yum or apt-get); both return non-zero when they cannot."""
    names = " ".join(candidates(exact))
    low = exact or minimum()
    test = f"== {low}" if exact else f">= {low}"
    packages = " ".join(f"python3.{m}" for m in ([exact[1]] if exact else range(low[1], NEWEST_MINOR + 1)))
    return f"""py=""
python_fits() {{  # the interpreter runs and is the version the bundle needs
    "$1" -c 'import sys; sys.exit(0 if sys.version_info[:2] {test} else 1)' >/dev/null 2>&1
}}
find_python() {{
    local name path
    for name in {names}; do
        path=$(command -v "$name" 2>/dev/null) || continue
        if python_fits "$path"; then py=$path; return 0; fi
        echo "gpunode first boot: $path is Python $("$path" -c 'import sys; print("%d.%d" % sys.version_info[:2])' \\
2>/dev/null || echo '?'), not {wanted(exact)}"
    done
    return 1
}}
install_python() {{  # the distro's own package (AL2023: python3.11 ... beside its python3 3.9)
    local package
    for package in {packages}; do
        echo "gpunode first boot: installing $package from the distribution"
        if command -v dnf >/dev/null 2>&1; then dnf install -y "$package" && return 0
        elif command -v yum >/dev/null 2>&1; then yum install -y "$package" && return 0
        elif command -v apt-get >/dev/null 2>&1; then
            DEBIAN_FRONTEND=noninteractive apt-get install -y "$package" && return 0
            apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y "$package" && return 0
        fi
    done
    return 1
}}"""


