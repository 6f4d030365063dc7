"""Which Python the first-boot script runs the bundle with (issue 26), without a lab host.

AWS's "Python in AL2023" (AL2023_PYTHON in gpunode/image/interpreter.py): /usr/bin/python3 stays 3.9 for the life of
AL2023, and newer Pythons are separate python3.N packages whose binaries sit beside it. The lab proof is
tests/test_user_data_python_lab.py.
"""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

from gpunode.image import interpreter
from gpunode.image.userdata import render_script
from gpunode.vendor_facts import value

REPO = Path(__file__).resolve().parents[1]


def test_the_minimum_is_pyprojects_and_al2023s_system_python_is_below_it() -> None:
    requires = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"]
    assert requires == ">={}.{}".format(*interpreter.minimum())
    system = tuple(map(int, value(interpreter.AL2023_PYTHON, "system_python").split(".")))
    assert system < interpreter.minimum()  # why plain python3 cannot be trusted there
    assert "3.11" in value(interpreter.AL2023_PYTHON, "newer_pythons")


def test_the_bundles_compiled_extensions_decide_the_version() -> None:
    assert interpreter.bundle_python(["lib/yaml/_yaml.cpython-311-x86_64-linux-gnu.so", "lib/nacl/_sodium.abi3.so",
                                      "lib/x.py"]) == (3, 11)
    assert interpreter.bundle_python(["lib/nacl/_sodium.abi3.so"]) is None
    assert interpreter.candidates((3, 11)) == ["python3.11", "python3"]
    any_new = interpreter.candidates(None)
    assert any_new[0] == f"python3.{interpreter.NEWEST_MINOR}" and any_new[-2:] == ["python3.11", "python3"]


def test_the_script_tries_versioned_names_before_python3_and_never_trusts_python3_alone() -> None:
    import io
    import tarfile

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz") as tar:
        info = tarfile.TarInfo("lib/yaml/_yaml.cpython-311-x86_64-linux-gnu.so")
        tar.addfile(info, io.BytesIO(b""))
    script = render_script(buffer.getvalue(), "base", "0" * 64, [])
    assert "for name in python3.11 python3; do" in script
    assert not re.search(r"^python3 -m gpunode", script, re.M) and '"$py" -m gpunode provision' in script
    assert f'"" {interpreter.NO_PYTHON_EXIT}' in script
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0  # valid bash
