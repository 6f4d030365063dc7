"""Every real capture in tests/data, wrapped the way people paste it, reads the same as the clean capture.

The disguises: a shell prompt line before it, `> ` quoting, CRLF line ends, ANSI colour codes, a 4-space indent,
lines hard-wrapped at 80 columns (a terminal's copy), a kernel log's `[ 12.345678]` stamps rewritten as `dmesg -H`
prints them (util-linux sys-utils/dmesg.c reltime: a "[Nov28 00:01] " stamp when the minute changes, "[  +0.000844] "
deltas between), and concatenation with another capture (before and after).
Each must give the same GPUs, findings and verdict as the clean capture (a concatenation: the union of both).
One test per disguise loops over all captures, so the suite stays fast as the corpus grows (captures2/ too).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from gpunode.parsers.smi_values import normalize_bus_id
from gpunode.verify import diagnose_files
from gpunode.verify.diagnose import DiagnoseResult

DATA = Path(__file__).resolve().parent / "data"
CAPTURES = [p for d in sorted(DATA.iterdir()) if d.is_dir() and (d.name == "nvidia" or d.name.startswith("captures"))
            for p in sorted(d.rglob("*")) if p.is_file() and not p.name.endswith(".md")
            and not p.name.endswith((".tar.gz", ".tgz"))]
# A one-line docker error (real: NVIDIA/nvidia-docker#1352) to paste next to every capture.
OTHER = DATA / "nvidia/errors/docker__could-not-select-device-driver__NVIDIA-nvidia-docker-1352.txt"


def _lines(text: str) -> list[str]:
    return text.split("\n")


def _wrap80(text: str) -> str:
    out: list[str] = []
    for line in _lines(text):
        while len(line) > 80:
            out.append(line[:80])
            line = line[80:]
        out.append(line)
    return "\n".join(out)


_MONOTONIC = re.compile(r"^\[\s*(\d+)\.(\d{6})\] ")
_BOOT = datetime(2026, 11, 28, 0, 0, 0)  # any wall-clock boot time: dmesg -H adds the stamps to it


def _dmesg_human(text: str) -> str:
    """Every `[  12.345678] ` stamped line as `dmesg -H` prints it: "[%b%e %H:%M] " when the minute changes,
    else the delta to the line before, "[  %+8.06f] " (under 10 s) or "[ %+9.06f] " (dmesg.c reltime)."""
    out, last = [], None
    for line in _lines(text):
        stamp = _MONOTONIC.match(line)
        if stamp is None:
            out.append(line)
            continue
        seconds = int(stamp.group(1)) + int(stamp.group(2)) / 1e6
        when = _BOOT + timedelta(seconds=seconds)
        if last is None or when.replace(second=0, microsecond=0) != last[1].replace(second=0, microsecond=0):
            prefix = f"[{when.strftime('%b')}{when.day:2d} {when.strftime('%H:%M')}] "
        else:
            delta = seconds - last[0]
            prefix = f"[  {delta:+8.06f}] " if delta < 10 else f"[ {delta:+9.06f}] "
        last = (seconds, when)
        out.append(prefix + line[stamp.end():])
    return "\n".join(out)


DISGUISES: dict[str, Callable[[str], str]] = {
    "prompt": lambda t: "user@gpu-node-1:~$ cat capture.txt\n" + t,
    "quoted": lambda t: "\n".join("> " + line if line else ">" for line in _lines(t)),
    "crlf": lambda t: t.replace("\n", "\r\n"),
    "ansi": lambda t: "\n".join(f"\x1b[1;32m{line}\x1b[0m" if line.strip() else line for line in _lines(t)),
    "indent4": lambda t: "\n".join("    " + line if line.strip() else line for line in _lines(t)),
    "wrap80": _wrap80,
    "dmesg-H": _dmesg_human,
}


def _gpus(result: DiagnoseResult) -> list[tuple[str, str, str]]:
    report = result.report
    return sorted(((g.uuid or "").lower(), normalize_bus_id(g.pci_bus_id) or "", g.name or "")
                  for g in (report.gpus if report else []))


def _findings(result: DiagnoseResult) -> set[tuple[str, str]]:
    return {(f.id, f.severity) for f in result.findings}


def _read(path: Path, text: str) -> DiagnoseResult:
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    return diagnose_files([path])


def _text(path: Path) -> str:
    return path.read_bytes().decode("utf-8", "surrogateescape")


def test_the_corpus_is_there():
    assert len(CAPTURES) >= 200


def test_the_dmesg_h_disguise_is_what_dmesg_prints():
    """The first stamp is the minute line, the next ones deltas in dmesg's two widths (%+8.06f / %+9.06f)."""
    text = "[    5.000001] a\n[    5.000845] b\n[   20.000845] c\n[  125.000000] d\nno stamp"
    assert _dmesg_human(text) == ("[Nov28 00:00] a\n[  +0.000844] b\n[ +15.000000] c\n[Nov28 00:02] d\nno stamp")
    kernel_logs = [p for p in CAPTURES if _dmesg_human(_text(p)) != _text(p)]
    assert len(kernel_logs) >= 20


# (disguise, capture) pairs that read differently, each with its reason; a pair that starts to agree fails the test.
DISGUISE_MISSES = {
    ("wrap80", "captures/errors/lambdal-lambda-stack-dockerfiles-15__mount-error-file-exists-quoted-legacy.txt"):
        "the message catalogue reads one line at a time: docker's 300-character line cut at 80 columns mid-word gives "
        "its wrapper's finding on the first piece, not the hook's own error on the last (issue 39)",
}


@pytest.mark.parametrize("name", sorted(DISGUISES))
def test_every_capture_reads_the_same_in_disguise(tmp_path: Path, name: str):
    disguise = DISGUISES[name]
    wrong = []
    for capture in CAPTURES:
        clean = diagnose_files([capture])
        text = _text(capture)
        if "\x00" in text[:4096] or not text.strip() or disguise(text) == text:
            continue
        disguised = _read(tmp_path / capture.name, disguise(text))
        got = (_gpus(disguised), _findings(disguised), disguised.verdict)
        want = (_gpus(clean), _findings(clean), clean.verdict)
        miss = (name, str(capture.relative_to(DATA))) in DISGUISE_MISSES
        if (got != want) != miss:
            wrong.append(f"{capture.relative_to(DATA)}: clean {want} / {name} {got}" + (
                " (a listed miss that now reads the same: take it off DISGUISE_MISSES)" if miss else ""))
    assert not wrong, f"{len(wrong)} capture(s) read differently when {name}:\n" + "\n".join(wrong[:20])


@pytest.mark.parametrize("order", ["capture-first", "error-first"])
def test_every_capture_concatenated_with_a_container_error_keeps_both(tmp_path: Path, order: str):
    """A file holding a container error and a host capture: both are read."""
    other = _text(OTHER)
    other_findings = _findings(diagnose_files([OTHER]))
    wrong = []
    for capture in CAPTURES:
        text = _text(capture)
        if "\x00" in text[:4096] or not text.strip():
            continue
        clean = diagnose_files([capture])
        joined = text.rstrip("\n") + "\n\n" + other if order == "capture-first" else other + "\n" + text
        both = _read(tmp_path / capture.name, joined)
        if _gpus(both) != _gpus(clean) or not (_findings(clean) | other_findings) <= _findings(both):
            wrong.append(f"{capture.relative_to(DATA)}: clean {_gpus(clean)} {_findings(clean)} / joined "
                         f"{_gpus(both)} {_findings(both)}")
    assert not wrong, f"{len(wrong)} capture(s) lost evidence when concatenated:\n" + "\n".join(wrong[:20])
