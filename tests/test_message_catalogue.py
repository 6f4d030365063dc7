"""The message catalogue (gpunode/parsers/catalogs/messages/*.yaml, issue 39): every entry is read back as its own
finding from a line derived from its own format string, alone and inside the wrappers logs put around messages; no
two entries claim a line with different findings; every entry cites its source and has a fix; bad files are
refused with the file and entry named; non-NVIDIA entries never become NVIDIA findings."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from gpunode.parsers.catalogs import messages
from gpunode.parsers.catalogs.messages import (
    CatalogueError,
    MessageEntry,
    foreign_vendor,
    load_catalogue,
    match_line,
    message_matches,
    read_folder,
)
from gpunode.parsers.errors_text import classify_errors, inherited_fix
from gpunode.parsers.message_format import format_regex, pieces, sample_line
from gpunode.verify.checks.analyze import analyze
from gpunode.verify.evidence import Evidence, Expectations

REPO = Path(__file__).resolve().parents[1]
ENTRIES = load_catalogue()
# Issue 39's must-show: at least this many entries from at least this many programs.
MUST_SHOW_ENTRIES = 300
MUST_SHOW_PROGRAMS = 12


def _id(entry: MessageEntry) -> str:
    return f"{entry.file}#{entry.index}"


def _wrapped(line: str) -> list[str]:
    """line as logs carry it: alone, after a timestamp, in a Go logger's logfmt line, as a JSON log field."""
    return [line, f"2026-11-28T00:01:02.345Z {line}", f"Nov 28 00:01:02 node1 prog[123]: {line}",
            f"time=\"2026-11-28T00:01:02Z\" level=error msg={json.dumps(line)}",
            json.dumps({"level": "error", "ts": 1.7e9, "msg": f"failed: {line}"})]


def test_the_catalogue_is_not_empty_and_every_program_is_its_file() -> None:
    assert ENTRIES
    assert all(entry.file == f"{entry.program}.yaml" for entry in ENTRIES)


@pytest.mark.parametrize("entry", ENTRIES, ids=_id)
def test_each_entry_reads_its_own_sample_line_as_its_finding(entry: MessageEntry) -> None:
    for line in _wrapped(entry.sample):
        found = match_line(line)
        assert found is not None, f"{_id(entry)}: {entry.pattern.pattern!r} does not match {line!r}"
        assert found.entry.finding == entry.finding, f"{_id(entry)}: {line!r} read as {_id(found.entry)}"
    if entry.vendor == "nvidia" and entry.context != "kernel":  # what diagnose reports for it
        ids = {match.id for match in classify_errors(entry.sample)}
        assert entry.finding in ids, f"{_id(entry)}: classify_errors gives {ids}"
    if entry.vendor != "nvidia":
        assert foreign_vendor(entry.sample) == entry.vendor
        assert not [m for m in classify_errors(entry.sample) if m.line == entry.sample.strip()]


@pytest.mark.parametrize("entry", ENTRIES, ids=_id)
def test_no_two_entries_claim_a_derived_line_with_different_findings(entry: MessageEntry) -> None:
    """The most specific entries matching a sample (most literal characters) agree on the finding; a more
    generic entry of another finding may match too, it is outranked."""
    claims = [other for other in ENTRIES if other.pattern.search(entry.sample)]
    top = max(other.literal_length for other in claims)
    findings = {(other.finding, other.vendor) for other in claims if other.literal_length == top}
    assert findings == {(entry.finding, entry.vendor)}, (
        f"{_id(entry)} {entry.sample!r} is claimed by {[_id(o) for o in claims if o.literal_length == top]}")


@pytest.mark.parametrize("entry", ENTRIES, ids=_id)
def test_each_entry_cites_its_source_and_has_a_fix(entry: MessageEntry) -> None:
    assert entry.program and entry.summary and entry.severity in ("critical", "warning", "info")
    assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}:\S+:\d+", entry.source) or entry.source.startswith(
        "https://"), entry.source
    assert entry.fix or inherited_fix(entry.finding), f"{_id(entry)}: no fix and no finding {entry.finding} to " \
                                                      "inherit one from"


def test_the_catalogue_size_is_reported() -> None:
    programs = {entry.program for entry in ENTRIES}
    print(f"message catalogue: {len(ENTRIES)} entries from {len(programs)} programs: {', '.join(sorted(programs))}")
    assert len(ENTRIES) >= 25 and len(programs) >= 2  # the seed files of the engine branch (nvml, cuda-runtime)


def test_the_catalogue_meets_issue_39s_must_show() -> None:
    programs = {entry.program for entry in ENTRIES}
    assert len(ENTRIES) >= MUST_SHOW_ENTRIES and len(programs) >= MUST_SHOW_PROGRAMS, (
        f"{len(ENTRIES)} entries from {len(programs)} programs")


def test_the_catalogue_ships_in_the_wheel() -> None:
    data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["gpunode"]
    package = REPO / "gpunode"
    shipped = {path for pattern in data for path in package.glob(pattern)}
    assert set(messages.CATALOGUE_DIR.glob("*.yaml")) <= shipped


# ---- derivation ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("format_text", "style", "line", "other"), [
    ("GPU %s has %d errors", "printf", "GPU 0000:3b:00.0 has 12 errors", "GPU x has many errors"),
    ("read %u bytes at %08x (%llu total)", "printf", "read 4096 bytes at 00ff12ab (123456789 total)",
     "read -1 bytes at zz (1 total)"),
    ("ring %-5s timeout after %.*s ms: 100%% busy", "printf", "ring gfx   timeout after 10000 ms: 100% busy",
     "ring gfx timeout after 10 ms: 100 busy"),
    ("failed to %v device: %w (%+v, %T, %q)", "printf",
     'failed to open device: no such file (&{x}, *errors.errorString, "nvidia0")', "failed to open devices"),
    ("Xid %#x on {} at %p", "printf", "Xid 0x1f on {} at 0x7ffe12", "Xid 0x1f on GPU at 0x7ffe12"),
    ("device {} lost: {name} code {:x} {{literal}}", "brace", "device 3 lost: gpu-a code 1f {literal}",
     "device 3 lost: gpu-a code zz {literal}"),
    ("Failed to initialize NVML", "literal", "E1128 Failed  to initialize\tNVML: x", "Failed to initialize NVMLX"),
])
def test_a_format_becomes_a_pattern_of_its_fields(format_text: str, style: str, line: str, other: str) -> None:
    parts = pieces(format_text, style)
    pattern = re.compile(format_regex(parts), re.I)
    assert pattern.search(line), (pattern.pattern, line)
    assert not pattern.search(other), (pattern.pattern, other)
    assert pattern.search(sample_line(parts))


def test_literal_text_is_escaped_and_quotes_may_come_escaped() -> None:
    pattern = re.compile(format_regex(pieces('cannot open "%s" (a+b) [x]', "printf")))
    assert pattern.search('cannot open "/dev/nvidia0" (a+b) [x]')
    assert pattern.search(json.dumps({"msg": 'cannot open "/dev/nvidia0" (a+b) [x]'}))
    assert not pattern.search('cannot open "/dev/nvidia0" (aab) [x]')


def test_a_prefix_is_optional_unless_required_and_words_do_not_match_inside_longer_words() -> None:
    optional = re.compile(format_regex(pieces("no devices found", "literal"), "nvidia-container-cli: "))
    required = re.compile(format_regex(pieces("out of memory", "literal"), "CUDA error: ", prefix_required=True))
    assert optional.search("nvidia-container-cli: no devices found") and optional.search("x: no devices found")
    assert required.search("RuntimeError: CUDA error: out of memory")
    assert not required.search("java.lang.OutOfMemoryError: out of memory")
    assert not re.compile(format_regex(pieces("ERROR_GPU_IS_LOST", "literal"))).search("XERROR_GPU_IS_LOSTY")


# ---- loading ------------------------------------------------------------------------------------------------

_GOOD = """\
program: {program}
vendor: {vendor}
versions: "1.0"
source:
  repo: example/example
  commit: 0123456789abcdef0123456789abcdef01234567
entries:
  - format: "{format}"
    style: printf
    path: src/main.c
    line: 10
    finding: {finding}
    severity: critical
    context: kernel
    summary: "a test message"
    fix: "do the test thing"
"""


def _folder(tmp_path: Path, **files: str) -> Path:
    for name, text in files.items():
        (tmp_path / f"{name}.yaml").write_text(text)
    return tmp_path


@pytest.mark.parametrize(("change", "problem"), [
    (("severity: critical", "severity: fatal"), "severity must be one of"),
    (("line: 10", "lines: 10"), "unknown key(s) lines"),
    (('format: "the %s device failed"', 'format: "%s: %d"'), "too little literal text"),
    (("finding: test-finding", "finding: Test_Finding"), "finding must be a kebab-case id"),
    (("    path: src/main.c\n", ""), "needs the entry's path and line"),
    (('format: "the %s device failed"', 'format: "the {} device {"\n    style: brace'), "unbalanced brace"),
])
def test_a_bad_entry_is_refused_naming_file_and_entry(tmp_path: Path, change: tuple[str, str], problem: str) -> None:
    text = _GOOD.format(program="broken", vendor="nvidia", format="the %s device failed", finding="test-finding")
    if "style: brace" in change[1]:
        text = text.replace("    style: printf\n", "")
    with pytest.raises(CatalogueError) as caught:
        read_folder(_folder(tmp_path, broken=text.replace(*change)))
    assert str(caught.value).startswith("broken.yaml: entry 1"), caught.value
    assert problem in str(caught.value), caught.value


def test_a_bad_file_is_refused_naming_it(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with pytest.raises(CatalogueError, match=r"^other\.yaml: program 'wrong' must be the file name"):
        read_folder(_folder(tmp_path / "a", other=_GOOD.format(program="wrong", vendor="nvidia", format="the %s "
                                                               "device", finding="test-finding")))
    with pytest.raises(CatalogueError, match=r"^bad\.yaml: not valid YAML"):
        read_folder(_folder(tmp_path / "b", bad="a: [b"))


def test_foreign_vendor_lines_never_become_nvidia_findings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A synthetic non-NVIDIA program (the engine's rule, not a vendor fact): its line is recognised as foreign and
    gives no NVIDIA finding, even where an NVIDIA entry's shorter wording matches the same line."""
    folder = _folder(tmp_path,
                     **{"test-other": _GOOD.format(program="test-other", vendor="amd",
                                                   format="example ring %s timeout, GPU reset begin", finding="x-y"),
                        "test-nvidia": _GOOD.replace("context: kernel", "context: host").format(
                            program="test-nvidia", vendor="nvidia", format="GPU reset begin", finding="z-w")})
    monkeypatch.setattr(messages, "CATALOGUE_DIR", folder)
    line = "[  12.5] example ring gfx timeout, GPU reset begin"
    assert foreign_vendor(line) == "amd"
    assert foreign_vendor("[  12.5] GPU reset begin") is None
    assert [m.entry.program for m in message_matches(line, frozenset({"nvidia"}))] == []
    assert classify_errors(line) == []
    assert [m.id for m in classify_errors("host: GPU reset begin")] == ["z-w"]


# ---- wiring -------------------------------------------------------------------------------------------------

def test_a_line_both_a_hand_signature_and_an_entry_read_gives_one_finding() -> None:
    text = "failed to initialize NVML: ERROR_LIBRARY_NOT_FOUND\n"  # hand signature and nvml.yaml entry 2
    assert [m.id for m in classify_errors(text)] == ["nvml-library-missing"]
    findings = analyze(Evidence(expectations=Expectations(), smi_error=text))
    assert [f.id for f in findings] == ["nvml-library-missing"]


def test_a_framework_error_becomes_the_entrys_finding_with_its_fix() -> None:
    text = "RuntimeError: CUDA error: no CUDA-capable device is detected\nCompile with `TORCH_USE_CUDA_DSA`\n"
    findings = analyze(Evidence(expectations=Expectations(), smi_error=text))
    assert [(f.id, f.severity) for f in findings] == [("cuda-no-device", "critical")]
    assert "framework: 'RuntimeError: CUDA error: no CUDA-capable device is detected'" in findings[0].evidence
    assert "--gpus all" in findings[0].remedy


def test_an_entry_without_a_fix_takes_the_existing_findings_fix() -> None:
    entry = next(e for e in ENTRIES if e.fix is None)
    match = next(m for m in classify_errors(entry.sample) if m.id == entry.finding)
    assert match.remedy == inherited_fix(entry.finding) != ""


def test_the_fast_line_keys_equal_the_per_line_fold_over_every_capture() -> None:
    """message_matches folds a whole log at once; over every file of tests/data (and odd whitespace and Unicode
    twins) that gives exactly what folding each line gives."""
    texts = [p.read_bytes().decode("utf-8", "replace") for p in sorted((REPO / "tests/data").rglob("*")) if p.is_file()]
    lines = [line for text in texts for line in text.split("\n")]
    lines += ["a\u2028b C", "x\x85y", "\u0130stanbul \u017f \u212a", "\x1cq r", "\u00c4B\nc"]
    assert messages._keys_of(lines) == [messages._key(line) for line in lines]


def test_a_kernel_entry_gives_its_finding_from_a_kernel_log_once(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A synthetic NVIDIA kernel entry: its line in a kernel log becomes its finding; a line a hand-written kernel
    condition already reads stays that condition's finding alone."""
    folder = _folder(tmp_path, **{"test-kernel": _GOOD.format(program="test-kernel", vendor="nvidia",
                                                              format="NVRM: example engine %s stalled for %u ms",
                                                              finding="test-stall").replace(
        "  - format:", "  - format: \"NVIDIA probe routine was not called for %d device(s)\"\n    style: printf\n"
        "    path: src/b.c\n    line: 3\n    finding: test-probe\n    severity: critical\n    context: kernel\n"
        "    summary: \"probe\"\n  - format:")})
    monkeypatch.setattr(messages, "CATALOGUE_DIR", folder)
    log = ("[  10.000001] NVRM: example engine gr0 stalled for 1200 ms\n"
           "[  11.000002] NVRM: The NVIDIA probe routine was not called for 1 device(s).\n")
    findings = {f.id: f for f in analyze(Evidence(expectations=Expectations(), kernel_log=log))}
    assert findings["test-stall"].severity == "critical" and findings["test-stall"].remedy == "do the test thing"
    assert "example engine gr0 stalled" in findings["test-stall"].evidence
    assert "nvidia-device-claimed" in findings and "test-probe" not in findings


def test_vendor_neutral_programs_count_only_where_the_text_names_nvidias_stack() -> None:
    """DKMS, kubelet and runc name no vendor (their entries are vendor `other`): a DKMS build failure is a finding
    when the log names the NVIDIA module it built, never for another module's build (issue 39: a DKMS failure of
    the nvidia module was HEALTHY)."""
    build = next(e for e in ENTRIES if e.program == "dkms" and e.finding == "dkms-build-failed")
    failed = build.sample
    nvidia = f"{failed}\nConsult /var/lib/dkms/nvidia/535.261.03/build/make.log for more information."
    zfs = f"{failed}\nConsult /var/lib/dkms/zfs/2.1.11/build/make.log for more information."
    assert "dkms-build-failed" in {m.id for m in classify_errors(nvidia)}
    assert not {m.id for m in classify_errors(zfs)} & {"dkms-build-failed"}
    assert [m.entry.finding for m in messages.nvidia_matches(zfs)] == []
