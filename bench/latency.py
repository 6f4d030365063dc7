"""A TCP relay that adds a fixed delay each way: lab hosts that look as far away as a cloud region.

The lab has no netem (no kernel modules), so each host gets a port on the lab bridge's gateway address that
relays to the host's sshd, every chunk held back by half the round-trip time in each direction. Traffic goes
only between the lab bridge and lab hosts.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress

BASE_PORT = 22000


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    """Copy reader to writer; each chunk leaves `delay` seconds after it arrived, in order."""
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def sender() -> None:
        while True:
            due, data = await queue.get()
            if not data:
                break
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            writer.write(data)
            await writer.drain()
        await asyncio.sleep(max(0.0, due - time.monotonic()))
        if writer.can_write_eof():
            writer.write_eof()

    task = asyncio.ensure_future(sender())
    with suppress(ConnectionError):
        while data := await reader.read(65536):
            queue.put_nowait((time.monotonic() + delay, data))
    queue.put_nowait((time.monotonic() + delay, b""))
    with suppress(OSError):  # the other side is gone already (ENOTCONN on the half-close): nothing left to relay
        await task


class DelayRelay:
    """Relays gateway:BASE_PORT+i to target_i:22 with `rtt_ms`/2 of delay each way, in a background thread."""

    def __init__(self, listen_address: str, targets: dict[int, str], rtt_ms: float) -> None:
        self.listen_address = listen_address
        self.targets = targets
        self.delay = rtt_ms / 2000
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.servers: list[asyncio.Server] = []

    def port(self, index: int) -> int:
        return BASE_PORT + index

    def start(self) -> None:
        self.thread.start()
        for index, address in self.targets.items():
            asyncio.run_coroutine_threadsafe(self._serve(index, address), self.loop).result(timeout=10)

    async def _serve(self, index: int, address: str) -> None:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                up_reader, up_writer = await asyncio.open_connection(address, 22)
            except OSError:
                writer.close()
                return
            await asyncio.gather(_pump(reader, up_writer, self.delay), _pump(up_reader, writer, self.delay))
            for w in (writer, up_writer):
                w.close()

        self.servers.append(await asyncio.start_server(handle, self.listen_address, self.port(index)))

    def stop(self) -> None:
        for server in self.servers:
            self.loop.call_soon_threadsafe(server.close)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)


@contextmanager
def delayed(listen_address: str, targets: dict[int, str], rtt_ms: float) -> Iterator[DelayRelay]:
    relay = DelayRelay(listen_address, targets, rtt_ms)
    relay.start()
    try:
        yield relay
    finally:
        relay.stop()
