"""The upstream transport's keep-alive pool: idle connections per origin and a cap on open ones.

A connection is only handed out again if it is provably still good: not
closed, idle for less than ``idle_expiry`` (kept under the 5 s keep-alive
timeout of uvicorn's and Node's servers, so the upstream does not close it as
we reuse it), and silent — an idle socket with something to read has been
closed by the upstream (or sent bytes nobody asked for), even if the event
loop has not noticed yet. The transport never resends a request the upstream
may have received, so this check is what keeps a closed socket from costing a
request.
"""

from __future__ import annotations

import asyncio
import collections
import select
import time

from .http11 import Connection

Origin = tuple[bytes, bytes, int]


class ConnectionPool:
    """Idle keep-alive connections per origin, and a cap on open connections."""

    def __init__(self, max_connections: int, max_idle: int, idle_expiry: float) -> None:
        self._idle: dict[Origin, list[Connection]] = {}
        self._open = 0
        self._max = max_connections
        self._max_idle = max_idle
        self._expiry = idle_expiry
        self._waiting: collections.deque[asyncio.Future[None]] = collections.deque()

    def take(self, origin: Origin) -> Connection | None:
        idle = self._idle.get(origin)
        now = time.monotonic()
        while idle:
            conn = idle.pop()  # the most recently used: the least likely to have been closed
            if not conn.closed and conn.expires > now and silent(conn):
                return conn
            self._drop(conn)
        return None

    def make_room(self) -> bool:
        """Whether one more connection may open, closing an idle one of any origin if need be."""
        if self._open < self._max:
            return True
        for idle in self._idle.values():
            if idle:
                self._drop(idle.pop(0))  # the least recently used
                return True
        return False

    async def wait(self) -> None:
        """Until a connection is released (idle again, or closed)."""
        slot = asyncio.get_running_loop().create_future()
        self._waiting.append(slot)
        try:
            await slot
        finally:
            if slot in self._waiting:
                self._waiting.remove(slot)

    def opened(self) -> None:
        self._open += 1

    def release(self, conn: Connection) -> None:
        idle = self._idle.setdefault(conn.origin, [])
        if conn.reusable and len(idle) < self._max_idle:
            conn.expires = time.monotonic() + self._expiry
            idle.append(conn)
            self._notify()
        else:
            self._drop(conn)

    def _drop(self, conn: Connection) -> None:
        conn.close()
        self._open -= 1
        self._notify()

    def _notify(self) -> None:
        while self._waiting:
            slot = self._waiting.popleft()
            if not slot.done():
                slot.set_result(None)
                return

    def close(self) -> None:
        for idle in self._idle.values():
            for conn in idle:
                conn.abort()
        self._idle.clear()


def silent(conn: Connection) -> bool:
    """Whether an idle connection's socket has nothing to read (a closed one reads as end of file)."""
    sock = conn.transport.get_extra_info("socket") if conn.transport is not None else None
    if sock is None:
        return True  # not a socket (a test's transport): nothing to check
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN)
    return not poller.poll(0)
