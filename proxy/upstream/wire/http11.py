"""The HTTP/1.1 wire of the upstream hop: one socket as an asyncio protocol, parsed by httptools.

A ``Connection`` carries one exchange at a time: ``start`` it, write the
request (``send_request``), await the head, then take the body's bytes as
they arrived (``b""`` at the end): all those buffered at once, so a burst of
the upstream's chunks read in one go is one chunk, relayed in one write
instead of one each. Reading stops while more than ``_HIGH_WATER`` bytes wait
to be taken, so a slow client slows the upstream instead of filling memory. ``Body`` is the
httpx stream over those chunks, with the read timeout *between* chunks.

The upstream is not trusted more than the client: a response head past
``MAX_HEAD_BYTES`` or ``MAX_HEADER_FIELDS`` (a flood of headers, one huge
header, a head that never ends) fails the exchange as soon as it is seen —
the caller answers 502 — and the socket is closed. The bounds are for all
the heads of one response together: interim (1xx) heads count towards them.
Framing that breaks (a chunk size that is not one) fails the body the same way.

A response to ``HEAD`` has no body whatever its ``content-length`` says: the
parser cannot be told so (httptools never lets ``on_headers_complete`` skip a
response's body), so its exchange ends at the end of the head, the parser is
stopped there, and the connection is not reused (bytes an upstream sends after
the head would be read as the next response).
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar, cast

import httptools
import httpx

# A response head may hold this much and this many header fields (SPEC §9); past either, a 502.
MAX_HEAD_BYTES = 64 * 1024
MAX_HEADER_FIELDS = 100
_HIGH_WATER = 256 * 1024  # buffered response bytes at which the socket stops being read
_LOW_WATER = 64 * 1024

T = TypeVar("T")


class Connection(asyncio.Protocol):
    """One upstream socket; serves one exchange at a time."""

    def __init__(self, origin: tuple[bytes, bytes, int]) -> None:
        self.origin = origin
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.closed = False
        self.expires = 0.0
        # Set for a plain-http origin reached through a forwarding proxy: requests go out in
        # absolute form, with this Proxy-Authorization value (b"": none).
        self.forward_proxy_auth: bytes | None = None
        self._headers: list[tuple[bytes, bytes]] = []
        self._head: asyncio.Future[tuple[int, list[tuple[bytes, bytes]]]] | None = None
        self._chunks: collections.deque[bytes] = collections.deque()
        self._buffered = 0
        self._waiter: asyncio.Future[None] | None = None
        self._complete = False
        self._error: BaseException | None = None
        self._paused_reading = False
        self._drain: asyncio.Future[None] | None = None
        self._until_eof = False
        self._keep_alive = False
        self._head_bytes = 0  # bytes received while the head was unfinished (interim heads included)
        self._head_fields = 0
        self._field_bytes = 0
        self._refused: str | None = None  # why the head was refused, once it was
        self._head_only = False  # the exchange is a HEAD: it ends with the head

    # -- asyncio.Protocol --------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        if self._head_only and self._complete:
            return  # after the head of a response to HEAD: never read (the connection is not reused)
        reading_head = self._head is not None and not self._head.done()
        if reading_head:
            self._head_bytes += len(data)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            if self._head_only and self._complete:
                return  # stopped at the end of the head of a response to HEAD (``on_headers_complete``)
            self._fail(httpx.RemoteProtocolError(self._refused or f"invalid upstream response: {exc}"))
            self.close()
            return
        except httptools.HttpParserUpgrade:  # Paperclip never asks for one: a broken upstream
            self._fail(httpx.RemoteProtocolError("the upstream switched protocols, which was not asked for"))
            self.close()
            return
        if reading_head and self._head is not None and not self._head.done() and self._head_bytes > MAX_HEAD_BYTES:
            self._fail(httpx.RemoteProtocolError(f"the upstream's response head exceeds {MAX_HEAD_BYTES} bytes"))
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._head is not None and self._head.done() and not self._complete and self._until_eof:
            self.on_message_complete()  # a body delimited by the end of the connection
        elif not self._complete:
            self._fail(httpx.RemoteProtocolError("the upstream closed the connection before the response ended"))
        if self._drain is not None and not self._drain.done():
            self._drain.set_exception(httpx.WriteError("the upstream closed the connection"))

    def pause_writing(self) -> None:
        self._drain = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._drain is not None and not self._drain.done():
            self._drain.set_result(None)
        self._drain = None

    # -- httptools callbacks -----------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        self._head_fields += 1
        self._field_bytes += len(name) + len(value) + 4  # ": " and the line's end
        if self._head_fields > MAX_HEADER_FIELDS:
            self._refused = f"the upstream's response has more than {MAX_HEADER_FIELDS} header fields"
        elif self._field_bytes > MAX_HEAD_BYTES:
            self._refused = f"the upstream's response head exceeds {MAX_HEAD_BYTES} bytes"
        if self._refused:
            raise _HeadRefused(self._refused)  # stops the parser; data_received fails the exchange
        self._headers.append((name, value))

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if 100 <= status < 200:  # an interim response (103 Early Hints): wait for the real one
            # Its fields are dropped but still counted: the bounds hold for all the heads of one
            # response together, or an endless run of interim heads would never be refused.
            self._headers = []
            return
        names = {n.lower() for n, _ in self._headers}
        self._until_eof = not self._head_only and b"content-length" not in names and b"transfer-encoding" not in names
        if self._head is not None and not self._head.done():
            self._head.set_result((status, self._headers))
        if self._head_only:  # no body follows, whatever the head says: the exchange ends here
            self._complete = True
            self._keep_alive = False
            self._chunks.append(b"")
            self._wake()
            raise _BodyLess  # stops the parser before it reads a body that is not there

    def on_body(self, body: bytes) -> None:
        if not body:
            return
        self._chunks.append(body)
        self._buffered += len(body)
        if self._buffered > _HIGH_WATER and self.transport is not None and not self._paused_reading:
            self._paused_reading = True
            self.transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        if self._head is None or not self._head.done() or self._complete:
            return  # the end of an interim response
        self._complete = True
        self._keep_alive = self.parser.should_keep_alive()  # only meaningful inside this callback
        self._chunks.append(b"")  # the end marker
        self._wake()

    # -- the exchange ------------------------------------------------------------------------

    def start(
        self, loop: asyncio.AbstractEventLoop, *, head_only: bool = False
    ) -> asyncio.Future[tuple[int, list[tuple[bytes, bytes]]]]:
        """A new exchange; ``head_only``: the request is a ``HEAD``, its response has no body."""
        self._head = loop.create_future()
        self._head_only = head_only
        self._headers = []
        self._chunks.clear()
        self._buffered = 0
        self._complete = False
        self._error = None
        self._until_eof = False
        self._head_bytes = self._head_fields = self._field_bytes = 0
        self._refused = None
        return self._head

    def write(self, data: bytes) -> None:
        assert self.transport is not None
        if self.closed:
            raise httpx.WriteError("the upstream closed the connection")
        self.transport.write(data)

    async def drained(self, within_s: float | None) -> None:
        if self._drain is not None:
            async with asyncio.timeout(within_s):
                await asyncio.shield(self._drain)

    async def next_chunk(self, within_s: float | None) -> bytes:
        """The body's bytes that arrived since the last call (waiting for some), ``b""`` at the end."""
        while not self._chunks:
            if self._error is not None:
                raise self._error
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await wait(self._waiter, within_s)
            finally:
                self._waiter = None
        chunk = self._chunks.popleft()
        if chunk and self._chunks and self._chunks[0]:  # more arrived already: one chunk of them all
            parts = [chunk]
            while self._chunks and self._chunks[0]:
                parts.append(self._chunks.popleft())
            chunk = b"".join(parts)
        self._buffered -= len(chunk)
        if self._paused_reading and self._buffered < _LOW_WATER and self.transport is not None:
            self._paused_reading = False
            self.transport.resume_reading()
        return chunk

    @property
    def complete(self) -> bool:
        return self._complete

    @property
    def reusable(self) -> bool:
        return self._complete and self._keep_alive and not self.closed and not self._until_eof

    def close(self) -> None:
        if self.transport is not None and not self.closed:
            self.closed = True
            self.transport.close()

    def abort(self) -> None:
        """Close at once: no TLS close_notify exchange that could outlive the event loop."""
        if self.transport is not None and not self.closed:
            self.closed = True
            self.transport.abort()

    def _fail(self, exc: BaseException) -> None:
        self._error = exc
        if self._head is not None and not self._head.done():
            self._head.set_exception(exc)
            self._head.exception()  # retrieved: a cancelled exchange never awaits it
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


class _HeadRefused(Exception):
    """Raised inside the parser's callback to stop it at a head past the bounds."""


class _BodyLess(Exception):
    """Raised inside the parser's callback to stop it at the end of the head of a response to HEAD."""


_SKIP = frozenset({b"expect"})  # no 1xx interim responses on this hop


async def send_request(conn: Connection, request: httpx.Request, body: bytes | None, write_s: float | None) -> None:
    """The request on the wire: head and an in-memory body in one write, else the stream as it comes."""
    target = request.url.raw_path
    if conn.forward_proxy_auth is not None:
        target = request.url.raw_scheme + b"://" + request.url.netloc + target
    head = [request.method.encode("ascii"), b" ", target, b" HTTP/1.1\r\n"]
    if conn.forward_proxy_auth:
        head += [b"proxy-authorization: ", conn.forward_proxy_auth, b"\r\n"]
    chunked = False
    for name, value in request.headers.raw:
        low = name.lower()
        if low in _SKIP:
            continue
        if low == b"transfer-encoding" and value.lower() == b"chunked":
            chunked = True
        head += [name, b": ", value, b"\r\n"]
    head.append(b"\r\n")
    if body is not None:
        if len(body) < 65536:
            conn.write(b"".join(head) + body)
        else:
            conn.write(b"".join(head))
            conn.write(body)
        await conn.drained(write_s)
        return
    conn.write(b"".join(head))
    assert isinstance(request.stream, httpx.AsyncByteStream)
    async for part in request.stream:
        if part:
            conn.write(b"%x\r\n%b\r\n" % (len(part), part) if chunked else part)
            await conn.drained(write_s)
    if chunked:
        conn.write(b"0\r\n\r\n")
    await conn.drained(write_s)


class Body(httpx.AsyncByteStream):
    """A response body as the upstream sends it; the connection goes back through ``release``."""

    def __init__(
        self,
        conn: Connection,
        release: Callable[[Connection], None],
        read_timeout: float | None,
        request: httpx.Request,
    ) -> None:
        self._release = release
        self._conn = conn
        self._timeout = read_timeout
        self._request = request
        self._done = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while not self._done:
            try:
                chunk = await self._conn.next_chunk(self._timeout)
            except TimeoutError as exc:
                await self.aclose()
                raise httpx.ReadTimeout("no data from the upstream within the read timeout", request=self._request) from exc
            except httpx.HTTPError as exc:
                await self.aclose()
                exc.request = self._request
                raise
            if not chunk:  # the end of the body
                self._done = True
                self._release(self._conn)
                return
            yield chunk

    async def aclose(self) -> None:
        if not self._done:
            self._done = True
            if not self._conn.complete:
                self._conn.close()  # a response abandoned half-way: the upstream request is cancelled
            self._release(self._conn)


async def wait(future: asyncio.Future[T], within_s: float | None) -> T:
    """``await future``, raising ``TimeoutError`` after ``within_s``.

    A timer on the future itself: ``asyncio.timeout`` costs several times more,
    and this runs for every response head and every body chunk waited for.
    """
    if within_s is None:
        return await future
    timer = future.get_loop().call_later(within_s, _expire, future)
    try:
        return await future
    finally:
        timer.cancel()


def _expire(future: asyncio.Future[Any]) -> None:
    if not future.done():
        future.set_exception(TimeoutError())
