"""The suite holds when started in the background (issue 41: `nohup bash dev/test &` failed five Ctrl-C tests, as
their gpunode children inherited SIGINT ignored): tests/conftest.py gives SIGINT a handler, which exec resets."""

from __future__ import annotations

import signal
import subprocess
import sys


def test_children_of_the_suite_can_be_interrupted():
    assert signal.getsignal(signal.SIGINT) is not signal.SIG_IGN
    child = subprocess.run([sys.executable, "-c", "import signal; print(signal.getsignal(signal.SIGINT).__name__)"],
                           capture_output=True, text=True, check=True)
    assert child.stdout.strip() == "default_int_handler"  # Python's own: Ctrl-C is a KeyboardInterrupt there
