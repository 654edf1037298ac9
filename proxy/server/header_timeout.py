"""Clients that do not send their request headers in time are dropped (``server.header_timeout_s``).

uvicorn bounds a kept-alive connection's idle time, but not the time a
request's head may take to arrive: a client that trickles one header byte at
a time holds its socket (and its share of the server's memory) for ever —
1,200 such sockets were all still held after 26 s. This is uvicorn's
httptools protocol with one timer more: armed when a connection opens, and
when a kept-alive connection's next request begins; disarmed when the
request's headers are complete. A head still unfinished when it fires is
dropped: the connection is closed, the app never sees the request.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


def header_timeout_protocol(seconds: float) -> type[HttpToolsProtocol]:
    """uvicorn's ``http`` protocol class, dropping a client whose request head takes over ``seconds``."""

    class HeaderTimeoutProtocol(HttpToolsProtocol):
        _deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            if self._deadline is None:  # a kept-alive connection's next request; the first keeps its deadline
                self._arm()

        def on_headers_complete(self) -> None:
            self._disarm()
            super().on_headers_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._deadline = self.loop.call_later(seconds, self._expired)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _expired(self) -> None:
            self._deadline = None
            if not self.transport.is_closing():
                self.transport.close()

    return HeaderTimeoutProtocol
