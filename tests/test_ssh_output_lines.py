"""An SSH command's output, as the channel hands it over in chunks: the whole output comes back, and on_output (the
host log, -v) gets whole lines, however the chunks cut them. A one-line package of tens of MB (the module cache's
base64) is split once, not once per chunk (that was quadratic: 25 to 45 s of controller CPU per package). Its input
goes out a packet at a time, each packet's bytes copied once (paramiko's sendall copies all that is left)."""

from __future__ import annotations

import pytest

from gpunode.connection.ssh import _collect, _Lines, send_all


class Channel:
    """What _collect reads of a paramiko channel: stdout in the given chunks, then exit status 0."""

    closed = False

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = list(chunks)

    def recv_ready(self) -> bool:
        return bool(self.chunks)

    def recv(self, size: int) -> bytes:
        return self.chunks.pop(0)

    def recv_stderr_ready(self) -> bool:
        return False

    def exit_status_ready(self) -> bool:
        return not self.chunks

    def recv_exit_status(self) -> int:
        return 0


def collect(chunks: list[bytes]) -> tuple[str, list[str]]:
    lines: list[str] = []
    code, out, err = _collect(Channel(chunks), None, lines.append, "h", bytearray(), bytearray())
    assert (code, err) == (0, "")
    return out, lines


def test_lines_cut_anywhere_come_out_whole():
    out, lines = collect([b"one\ntw", b"o", b"\n\nthr", b"ee\nfour"])
    assert out == "one\ntwo\n\nthree\nfour"
    assert lines == ["one", "two", "", "three", "four"]


def test_output_ending_with_a_newline_has_no_empty_last_line():
    assert collect([b"a\n", b"b\n"])[1] == ["a", "b"]
    assert collect([])[1] == []


def test_a_utf8_character_cut_between_chunks_is_decoded_whole():
    text = "größe: 5 °C\n".encode()
    cut = text.index("ö".encode()) + 1  # inside the two bytes of ö
    out, lines = collect([text[:cut], text[cut:]])
    assert lines == ["größe: 5 °C"] and out == "größe: 5 °C\n"


def test_a_long_line_in_many_chunks_is_one_line_joined_once():
    line = b"QUJD" * 250_000  # 1 MB of base64 without a newline, as the module cache's pack prints it
    chunks = [b"VERMAGIC=6.1.0 SMP\n"] + [line[i:i + 4096] for i in range(0, len(line), 4096)] + [b"\n"]
    out, lines = collect(chunks)
    assert lines == ["VERMAGIC=6.1.0 SMP", line.decode()]
    assert out.encode() == chunks[0] + line + b"\n"


def test_lines_keep_only_a_list_of_pieces_while_no_newline_comes():
    got: list[str] = []
    lines = _Lines(got.append)
    for _ in range(1000):
        lines.feed(b"x" * 100)
    assert got == [] and len(lines.pending) == 1000  # appended, never re-joined or re-split per chunk
    lines.feed(b"\nend")
    lines.close()
    assert got == ["x" * 100_000, "end"]


class Window:
    """What send_all uses of a channel: send() takes at most a packet's 32 KiB, or nothing once closed."""

    def __init__(self, closes_after: int | None = None) -> None:
        self.got: list[bytes] = []
        self.closes_after = closes_after

    def send(self, data: bytes) -> int:
        if self.closes_after is not None and sum(map(len, self.got)) >= self.closes_after:
            return 0
        self.got.append(bytes(data[:32768]))
        return len(self.got[-1])


def test_input_goes_out_whole_in_order_a_packet_at_a_time():
    data = bytes(range(256)) * 4000 + b"end"  # 1 MB: 32 packets and a bit
    channel = Window()
    send_all(channel, data)
    assert b"".join(channel.got) == data
    assert max(map(len, channel.got)) == 32768 and len(channel.got) == len(data) // 32768 + 1
    send_all(channel, b"")  # nothing to send: no packet
    assert b"".join(channel.got) == data


def test_a_channel_that_closes_mid_input_is_an_error_not_a_spin():
    with pytest.raises(EOFError, match="closed before its input was sent"):
        send_all(Window(closes_after=65536), b"x" * 200_000)
