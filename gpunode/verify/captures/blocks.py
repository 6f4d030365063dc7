"""Read any pasted capture as a sequence of blocks, each of one kind.

The text is first undisguised (CRLF, ANSI colour codes, `> ` quoting, a common indentation, lines hard-wrapped at
a terminal width), then cut at command prompts, capture headers, Markdown fences, blank lines and format
boundaries (an XML document, a table's box), and each piece's kind is detected on its own. Neighbouring pieces
of one output (the sections of `nvidia-smi -q`, a kernel log with blank lines) are joined again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpunode.parsers.cuda_bandwidth_test import is_bandwidth_test
from gpunode.parsers.cuda_p2p_test import is_p2p_test
from gpunode.parsers.dcgmi import is_dcgmi_diag
from gpunode.parsers.dcgmi_json import dcgmi_json_spans
from gpunode.parsers.kernel_log import has_kernel_markers
from gpunode.parsers.lspci_vv import is_lspci_vv
from gpunode.parsers.nccl_tests import is_nccl_tests, starts_nccl_tests
from gpunode.parsers.nccl_transport import is_nccl_debug
from gpunode.parsers.nvbandwidth import continues_nvbandwidth, is_nvbandwidth
from gpunode.parsers.vendor_lines import foreign
from gpunode.verify.captures.detect import detect_kind
from gpunode.verify.captures.units import failed_units

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][A-Z0-9]|\x1b[=>]")
_QUOTE = re.compile(r"^[ \t]*(?:>[ \t]?)+")
_COMMANDS = (r"nvidia-smi(?:\.exe)?|lspci|dmesg|journalctl|docker|podman|nerdctl|ctr|crictl|kubectl|"
             r"nvidia-container-cli|nvidia-ctk|dcgmi|cat|grep|egrep|tail|head|less|modprobe|insmod|lsmod|modinfo|"
             r"uname|dkms|nvidia-bug-report\.sh|nvcc|systemctl|mokutil|sudo|time|watch")
# "$ nvidia-smi -L", "root@gpu1:~# lspci -vv", "[me@host ~]$ dmesg", "PS C:\\> nvidia-smi", "C:\\...\\NVSMI>nvidia-smi",
# "❯ nvidia-smi", "(venv) me@host dir# nvidia-smi", and a bare "nvidia-smi -q" line.
_PROMPT = re.compile(
    r"^\s*(?:(?P<prompt>[^|<\n]{0,80}?(?:[$#%>❯➜»]))\s*|)(?P<cmd>(?:" + _COMMANDS + r")(?=\s|$)(?!\s*:)[^\n]*)$")
# Lines that head or fence a capture (Markdown fences, `tail` headers, nvidia-bug-report's "_____" rules).
_HEADER = re.compile(r"^\s*(?:```.*|~~~.*|==> .* <==|-{3,} ?[\w./ -]+ ?-{3,}|_{20,}|"
                     r"</?(?:details|summary|pre|code)>.*)\s*$")
_WRAP_WIDTH = 80  # a terminal's default width: a line of exactly this length may continue on the next
# A line that starts a record of its own (a box line, a timestamped log line, a prompt, a GPU line): never the
# continuation of a wrapped line.
_RECORD_START = re.compile(r"^(?:[|+].|\{\"|\[\s*\d+\.\d+[] ]|\[\s*[+<]\s*\d|\[[A-Z][a-z]{2} ?\d{1,2} \d\d:\d\d\]|"
                           r"\[[A-Z][a-z]{2} [A-Z]|[A-Z][a-z]{2} [ \d]\d \d\d:|"
                           r"\d{4}-\d\d-\d\dT|\d+,\d+,\d+,|<\d>\[|\S+@\S+:\S*[$#]|\$ |GPU \d+: |  MIG |\s+NVRM:)")
_TABLE_TOP = re.compile(r"^\s*\+-{10,}")
_BOX = re.compile(r"^\s*[|+]")
_DATE = re.compile(r"^\s*[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \d{4}\s*$")
_XML_START = re.compile(r"<\?xml|<!DOCTYPE nvidia_smi_log|<nvidia_smi_log\b")
_XML_END = "</nvidia_smi_log>"
_NEW_DOCUMENT = {
    "smi-table": re.compile(r"NVIDIA-SMI \S+"),
    "smi-text": re.compile(r"=+NVSMI LOG=+|^Driver Version\s+:", re.M),
    "smi-csv": re.compile(r"^[a-z_.]+(?: \[[^\]]+\])?(?:, ?[a-z_.]+(?: \[[^\]]+\])?)+\s*$", re.M),
}


# Lines that carry on a benchmark's output after a blank line: NCCL's debug lines (host:pid:tid [dev] NCCL ...,
# mpirun tags allowed), nccl-tests' own `#` and error lines; the CUDA samples' device, result, NOTE and matrix lines.
_CONTINUES = {
    "nccl-tests": re.compile(r"^\s*(?:\[[\d,]+\]<std\w+>:)?(?:\[\d+\] )?"
                             r"(?:\S+:\d+:\d+ \[\d+\] (?:NCCL|\S+\.cc:\d+ NCCL)|#|\S+: Test |"
                             r"\s*\.\. \S+ pid \d+: Test )"),
    "nccl-debug": re.compile(r"^\s*(?:\[[\d,]+\]<std\w+>:)?(?:\[\d+\] )?\S+:\d+:\d+ \[\d+\] (?:NCCL|\S+\.cc:\d+ NCCL)"),
    "cuda-bandwidthtest": re.compile(r"^\s*(?:Device \d+: |Quick Mode|Range Mode|Shmoo Mode|Result = |NOTE: |"
                                     r"Running on|(?:Host to Device|Device to Host|Device to Device) Bandwidth|"
                                     r"(?:PINNED|PAGEABLE) Memory|Transfer Size|\d+\s+[0-9.]+\s*$)"),
    "cuda-p2p": re.compile(r"^\s*(?:(?:GPU|CPU|D\\D)(?:\s+\d+)+\s*$|\d+(?:\s+[0-9.]+)+\s*$|NOTE: |P2P=|\*\*\*NOTE|"
                           r"So you can see|\.\.\.)"),
}


@dataclass
class Block:
    """One piece of a capture: its detected kind, its text, and the command line that produced it, if shown."""

    kind: str
    text: str
    command: str | None = None


def undisguise(text: str) -> str:
    """text as the program printed it: CRLF, ANSI codes, `> ` quoting, common indentation and hard wraps undone."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _ANSI.sub("", text).replace("\x1b", "")
    lines = _unquote(text.split("\n"))
    lines = _unquote(_unwrap(lines))  # quoted lines wrapped at 80 columns: their tails carried no `> `
    return "\n".join(_dedent(lines))


def _unquote(lines: list[str]) -> list[str]:
    """lines without their `> ` quoting, when most lines are quoted."""
    quoted = [line for line in lines if line.strip()]
    if quoted and sum(1 for line in quoted if _QUOTE.match(line)) * 2 > len(quoted):
        return [_QUOTE.sub("", line, count=1) for line in lines]
    return lines


def without_prompts(text: str) -> str:
    """text undisguised, without the shell prompt lines (`user@host:~$ cat x`) a poster kept above outputs."""
    kept = []
    for line in undisguise(text).split("\n"):
        prompt = _PROMPT.match(line)
        if prompt is None or prompt.group("prompt") is None:
            kept.append(line)
    return "\n".join(kept).strip("\n")


def _dedent(lines: list[str]) -> list[str]:
    """Remove the indentation every non-blank line shares (a Markdown list, a quoted code block); a prompt or
    fence line above the output does not count."""
    indents = [_indent(line) for line in lines if line.strip() and not _is_prompt_or_header(line)]
    cut = min(indents, default=0)
    return [line[min(cut, _indent(line)):] for line in lines] if cut else lines


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _is_prompt_or_header(line: str) -> bool:
    """A prompt line or a fence a poster typed above an indented output: not part of the output's indentation."""
    prompt = _PROMPT.match(line)
    return (prompt is not None and prompt.group("prompt") is not None) or _HEADER.match(line) is not None


def _unwrap(lines: list[str]) -> list[str]:
    """Join lines a terminal or a post hard-wrapped at a fixed width (a line of exactly the widest length whose
    next line does not start a record of its own)."""
    width = _WRAP_WIDTH
    if max((len(line) for line in lines), default=0) != width:
        return lines
    joined: list[str] = []
    carry = ""
    for number, line in enumerate(lines):
        line = carry + line
        carry = ""
        following = lines[number + 1] if number + 1 < len(lines) else ""
        if len(lines[number]) == width and following.strip() and (_open_box(lines[number]) or (
                not _RECORD_START.match(following) and not _same_indent(lines[number], following))):
            carry = line
            continue
        joined.append(line)
    if carry:
        joined.append(carry)
    return joined


def _open_box(line: str) -> bool:
    """A table box line cut before its closing `|`/`+`: the next line is its tail, whatever its indentation."""
    return _BOX.match(line) is not None and not line.endswith(("|", "+"))


def _same_indent(line: str, following: str) -> bool:
    """An indented line below a line of the same indentation is the next record, not a wrapped tail."""
    indent = len(line) - len(line.lstrip(" \t"))
    return indent > 1 and line[:indent] == following[:indent] and following[indent:indent + 1] not in (" ", "\t")


def split_blocks(text: str) -> list[Block]:
    """The blocks of a capture, in order, each with its own kind (see detect.KINDS, plus "lspci-vv")."""
    blocks: list[Block] = []
    parts: list[list[str]] = []  # each block's pieces, joined once at the end (not one copy per piece)
    for piece, command in _pieces(undisguise(text)):
        if command and "--query-" in command:  # the field list of `--format=csv,noheader` output
            piece = f"{command}\n{piece}"
        kind = _kind(piece, command)
        previous = blocks[-1] if blocks else None
        if previous is not None and command is None and _continues(previous, kind, piece):
            parts[-1].append(piece)
            if previous.kind == "unknown":
                previous.kind = kind
            continue
        blocks.append(Block(kind, piece, command))
        parts.append([piece])
    for block, pieces in zip(blocks, parts, strict=True):
        block.text = "\n\n".join(pieces)
    return blocks


def _kind(piece: str, command: str | None) -> str:
    if is_lspci_vv(piece):
        return "lspci-vv"
    if is_dcgmi_diag(piece):
        return "dcgmi-diag"
    if is_nccl_tests(piece) or starts_nccl_tests(piece):
        return "nccl-tests"
    if is_nvbandwidth(piece):
        return "nvbandwidth"
    if is_p2p_test(piece):
        return "cuda-p2p"
    if is_nccl_debug(piece):
        return "nccl-debug"
    if is_bandwidth_test(piece):
        return "cuda-bandwidthtest"
    kind = detect_kind(piece)
    if kind == "unknown" and command and re.match(r"(?:sudo\s+)?(?:dmesg|journalctl)\b", command) and \
            has_kernel_markers(piece):
        return "kernel-log"
    if kind == "unknown" and failed_units(piece):
        return "unit-failure"  # systemctl's "Job for X failed", the journal's "Failed to start X."
    if kind == "unknown" and any(foreign(line) for line in piece.split("\n") if line.strip()):
        return "other-vendor"  # amdgpu/i915 lines without a log prefix, rocm-smi / xpu-smi output
    return kind


def _continues(previous: Block, kind: str, piece: str) -> bool:
    """Whether piece is more of the previous block's output (not a new document of the same kind)."""
    if previous.kind in ("smi-xml", "lspci-vv") or kind == "smi-xml":
        return False
    if kind == "unknown":
        return _structural_continuation(previous.kind, piece, previous.text)
    if kind != previous.kind:  # NCCL_DEBUG lines between an nccl-tests run's header and its table are the run's
        return (previous.kind, kind) in (("smi-text", "smi-text"), ("nccl-tests", "nccl-debug"),
                                         ("nccl-debug", "nccl-tests"))
    new_document = _NEW_DOCUMENT.get(kind)
    return new_document is None or not new_document.search(piece)


def _structural_continuation(kind: str, piece: str, previous_text: str) -> bool:
    first = piece.lstrip("\n").split("\n", 1)[0]
    last = previous_text.rstrip("\n").rsplit("\n", 1)[-1]
    if kind == "smi-table":
        return bool(_BOX.match(first))
    if kind == "smi-text":
        return first.startswith((" ", "\t", "GPU ")) or " : " in first
    if kind == "nvbandwidth":  # its version, CUDA, Device and NOTE lines, a matrix cut from its SUM line
        return continues_nvbandwidth(piece)
    if kind in _CONTINUES:  # NCCL_DEBUG lines between a run's header and its table; a sample's later sections
        return all(_CONTINUES[kind].match(line) for line in piece.split("\n") if line.strip())
    if kind == "smi-csv":  # rows after a blank line below their rows: as many fields as those
        return "," in first and first.count(",") == last.count(",")
    return False


def _pieces(text: str) -> list[tuple[str, str | None]]:
    """(piece, command shown above it) in order: XML and `dcgmi diag -j` documents whole, the rest cut at prompts,
    headers, blank lines and a table's box."""
    pieces: list[tuple[str, str | None]] = []
    position = 0
    for start, end, _ in dcgmi_json_spans(text) if '"DCGM' in text else []:
        line_start = text.rfind("\n", position, start) + 1
        pieces += _plain_pieces(text[position:line_start])
        command = pieces.pop()[1] if pieces and pieces[-1][0] == "" else None
        pieces.append((text[line_start:end].strip("\n"), command))
        position = end
    pieces += _plain_pieces(text[position:])
    return [(piece, command) for piece, command in pieces if piece.strip()]


def _plain_pieces(text: str) -> list[tuple[str, str | None]]:
    pieces: list[tuple[str, str | None]] = []
    rest = text
    while True:
        start = _XML_START.search(rest)
        if start is None:
            break
        line_start = rest.rfind("\n", 0, start.start()) + 1
        end = rest.find(_XML_END, start.start())
        end = _truncated_xml_end(rest, start.start()) if end == -1 else end + len(_XML_END)
        pieces += _cut(rest[:line_start])
        command = pieces.pop()[1] if pieces and pieces[-1][0] == "" else None
        pieces.append((rest[line_start:end].strip("\n"), command))
        rest = rest[end:]
    return pieces + _cut(rest)


def _truncated_xml_end(text: str, start: int) -> int:
    """Where an XML document cut before `</nvidia_smi_log>` ends: at the first line after it that is not markup
    (a tag, a DTD line, its `]>`), so what was pasted below it is read on its own."""
    position = text.find("\n", start)
    while position != -1:
        following = text.find("\n", position + 1)
        line = text[position + 1:following if following != -1 else len(text)].strip()
        if line and not line.startswith(("<", "]")):
            return position
        position = following
    return len(text)


def _cut(text: str) -> list[tuple[str, str | None]]:
    """Cut plain text at prompts, headers and blank lines; a command line with no output yields an empty piece."""
    pieces: list[tuple[str, str | None]] = []
    current: list[str] = []
    command: str | None = None

    def flush() -> None:
        nonlocal current, command
        if current or command is not None:
            pieces.extend((part, command if n == 0 else None) for n, part in enumerate(_split_box("\n".join(current))))
        current, command = [], None

    for line in text.split("\n"):
        prompt = _PROMPT.match(line)
        if prompt and (prompt.group("prompt") is not None or _bare_command(prompt.group("cmd"))):
            flush()
            command = prompt.group("cmd").strip()
            continue
        if not line.strip() or _HEADER.match(line):
            if current:
                flush()
            continue
        current.append(line)
    flush()
    return pieces


def _bare_command(cmd: str) -> bool:
    """A command line shown without a prompt: only nvidia-smi / lspci / dmesg / journalctl invocations."""
    return re.match(r"(?:sudo\s+)?(?:nvidia-smi(?:\.exe)?|lspci|dmesg|journalctl)(?:\s+-[-\w=,.]+.*)?\s*$", cmd) \
        is not None


def _split_box(piece: str) -> list[str]:
    """A table's box (with the date line above it) apart from lines before and after it in the same piece."""
    lines = piece.split("\n")
    top = next((i for i, line in enumerate(lines) if _TABLE_TOP.match(line) and i + 1 < len(lines)
                and "NVIDIA-SMI" in lines[i + 1]), None)
    if top is None:
        return [piece]
    if top > 0 and _DATE.match(lines[top - 1]):
        top -= 1
    end = top + 1
    while end < len(lines) and (_BOX.match(lines[end]) or _DATE.match(lines[end])):
        end += 1
    parts = ["\n".join(lines[:top]), "\n".join(lines[top:end]), *(_split_box("\n".join(lines[end:])) if end < len(
        lines) else [])]
    return [part for part in parts if part.strip()]
