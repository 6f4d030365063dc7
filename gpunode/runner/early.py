"""Connections opened while the rest of the run is still being set up: the SSH handshakes (mostly waiting for the
hosts) overlap the imports and the playbook's preparation instead of following them."""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor

from gpunode.connection import Connection, ConnectOptions, connect
from gpunode.inventory import Host


class EarlyConnections:
    """A connection per host; the first `count` (those the run starts with: `forks`) start opening at once."""

    def __init__(self, hosts: list[Host], options: ConnectOptions, count: int) -> None:
        self.connections: dict[str, Connection] = {h.name: connect(h, options) for h in hosts}
        first = hosts[:max(0, count)]
        self._pool = ThreadPoolExecutor(max_workers=max(1, len(first)), thread_name_prefix="connect")
        self.opening: dict[str, Future[None]] = {h.name: self._pool.submit(self.connections[h.name].open)
                                                 for h in first}
        self._pool.shutdown(wait=False)  # its threads end with their handshakes

    def abandon(self) -> None:
        """The run never started (an error, Ctrl-C): close what was opened."""
        for name, future in self.opening.items():
            future.cancel()
            self.connections[name].close()
