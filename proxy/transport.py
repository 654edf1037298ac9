"""A lean HTTP/1.1 transport for the upstream hop (the wire itself is ``http11``).

Why not httpcore: on this path it costs more CPU than the rest of the proxy
together (anyio cancel scopes, h11 validation, and a pool that polls every idle
socket on each request — linear in the pool's size at concurrency). This is an
``httpx.AsyncBaseTransport``, so the seam stays httpx's: requests and
responses are httpx objects, errors are httpx's exception tree (translated in
``upstream.translate`` as before), and tests may still pass any transport.

What it does: keep-alive pools per origin, one ``write`` for a request's head
and body when the body is in memory, streamed (chunked or sized) bodies
otherwise, response bodies handed over chunk by chunk as they arrive with
back-pressure on the socket, and per-phase timeouts: connect, write, and read
*between chunks* (never a total deadline). Closing a response before its end
closes the connection: that is how an upstream request is cancelled.

What it never does: resend a request. Once a request's first byte is handed to
a socket, the upstream may be generating (and billing) its answer, so a failure
after that — even on a reused connection, before any response byte — is the
caller's error, not a retry (Go's and nginx's proxies behave the same for a
POST). The pool checks a connection before reuse instead (``pool``).

What it leaves to httpx's own transport: ``HEAD`` (the parser cannot know such
a response has no body) and protocol upgrades.
"""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass
from typing import Any

import httpx

from .http11 import Body, Connection, wait
from .pool import ConnectionPool, Origin

_SKIP = frozenset({b"expect"})  # no 1xx interim responses on this hop


@dataclass(frozen=True)
class Timeouts:
    """Per phase, in seconds; ``None`` waits for ever. ``read`` is between chunks, not a total."""

    connect: float | None
    read: float | None
    write: float | None
    pool: float | None

    @classmethod
    def of(cls, request: httpx.Request, default: Timeouts) -> Timeouts:
        """The request's own (httpx puts a client's or a call's in its extensions), else ``default``."""
        given = request.extensions.get("timeout")
        if not given:
            return default
        return cls(given.get("connect"), given.get("read"), given.get("write"), given.get("pool"))


class LeanTransport(httpx.AsyncBaseTransport):
    """HTTP/1.1 to the upstream with per-phase timeouts; see the module docstring."""

    def __init__(
        self,
        timeouts: Timeouts,
        *,
        max_connections: int = 4096,
        max_keepalive: int = 512,
        keepalive_expiry: float = 4.0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self._timeouts = timeouts
        self._pool = ConnectionPool(max_connections, max_keepalive, keepalive_expiry)
        self._ssl = ssl_context  # None: the system's CAs through certifi, made on first use
        self._fallback: httpx.AsyncHTTPTransport | None = None
        self._keepalive_expiry = keepalive_expiry

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "HEAD" or "upgrade" in request.headers:
            return await self._fallback_transport().handle_async_request(request)
        url = request.url
        origin = (url.raw_scheme, url.raw_host, url.port or (443 if url.raw_scheme == b"https" else 80))
        body = request.content if isinstance(request.stream, httpx.ByteStream) else None
        timeouts = Timeouts.of(request, self._timeouts)
        conn = await self._acquire(origin, request, timeouts)
        return await self._exchange(conn, request, body, timeouts)

    async def _acquire(self, origin: Origin, request: httpx.Request, t: Timeouts) -> Connection:
        conn = self._pool.take(origin)
        if conn is not None:  # the usual case, without the cost of a timeout scope
            return conn
        try:
            async with asyncio.timeout(t.pool):
                while True:
                    conn = self._pool.take(origin)
                    if conn is not None:
                        return conn
                    if self._pool.make_room():
                        break
                    await self._pool.wait()
        except TimeoutError as exc:
            raise httpx.PoolTimeout("no upstream connection free in time", request=request) from exc
        return await self._connect(origin, request, t)

    def _fallback_transport(self) -> httpx.AsyncHTTPTransport:
        if self._fallback is None:
            limits = httpx.Limits(max_connections=64, keepalive_expiry=self._keepalive_expiry)
            self._fallback = httpx.AsyncHTTPTransport(limits=limits, retries=0)
        return self._fallback

    async def _connect(self, origin: Origin, request: httpx.Request, t: Timeouts) -> Connection:
        scheme, host, port = origin
        name = host.decode("ascii")
        tls = self._tls() if scheme == b"https" else None
        conn = Connection(origin)
        self._pool.opened()
        try:
            async with asyncio.timeout(t.connect):
                transport, _ = await asyncio.get_running_loop().create_connection(
                    lambda: conn, name, port, ssl=tls, server_hostname=name if tls else None
                )
            conn.transport = transport  # uvloop calls connection_made a tick later
        except TimeoutError as exc:
            self._pool.release(conn)
            raise httpx.ConnectTimeout("connecting to the upstream timed out", request=request) from exc
        except OSError as exc:
            self._pool.release(conn)
            raise httpx.ConnectError(f"cannot connect to the upstream: {exc}", request=request) from exc
        except BaseException:
            self._pool.release(conn)
            raise
        return conn

    def _tls(self) -> ssl.SSLContext:
        if self._ssl is None:
            self._ssl = httpx.create_ssl_context()
        return self._ssl

    async def _exchange(
        self, conn: Connection, request: httpx.Request, body: bytes | None, t: Timeouts
    ) -> httpx.Response:
        head_future = conn.start(asyncio.get_running_loop())
        try:
            try:
                await _send(conn, request, body, t.write)
            except TimeoutError as exc:
                raise httpx.WriteTimeout("the upstream did not take the request in time", request=request) from exc
            except httpx.TransportError:
                if not _answered(head_future):
                    raise  # else the upstream answered early (a 413, say) and stopped reading: relay that
            status, headers = await wait(head_future, t.read)
        except TimeoutError as exc:
            self._abandon(conn)
            raise httpx.ReadTimeout("the upstream sent no response within the read timeout", request=request) from exc
        except httpx.TransportError as exc:
            # Never resent, even on a reused connection that failed before a byte came back: the
            # upstream may have received the request and be generating (and billing) already.
            self._abandon(conn)
            exc.request = request
            raise
        except BaseException:  # cancelled (the client went away) or the request body failed
            self._abandon(conn)
            raise
        return httpx.Response(
            status,
            headers=headers,
            stream=Body(conn, self._pool.release, t.read, request),
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": b""},
            request=request,
        )

    def _abandon(self, conn: Connection) -> None:
        conn.close()
        self._pool.release(conn)

    async def aclose(self) -> None:
        self._pool.close()
        if self._fallback is not None:
            await self._fallback.aclose()


async def _send(conn: Connection, request: httpx.Request, body: bytes | None, write_s: float | None) -> None:
    """The request on the wire: head and an in-memory body in one write, else the stream as it comes."""
    head = [request.method.encode("ascii"), b" ", request.url.raw_path, b" HTTP/1.1\r\n"]
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


class UpstreamClient(httpx.AsyncClient):
    """An ``AsyncClient`` whose ``send`` goes straight to its transport.

    The upstream hop has no auth flow, redirects or hooks, and must not keep
    cookies: one client is shared by every tenant on a timeout profile, so a
    cookie jar would carry one tenant's upstream cookies into another's
    requests. Skipping that machinery is also most of what ``send`` costs.
    """

    def __init__(self, transport: httpx.AsyncBaseTransport, timeout: httpx.Timeout) -> None:
        super().__init__(transport=transport, timeout=timeout, follow_redirects=False, trust_env=False)
        self._direct = transport

    async def send(self, request: httpx.Request, *, stream: bool = False, **_: Any) -> httpx.Response:
        response = await self._direct.handle_async_request(request)
        response.request = request
        if not stream:
            try:
                await response.aread()
            finally:
                await response.aclose()
        return response


def _answered(head: asyncio.Future[tuple[int, list[tuple[bytes, bytes]]]]) -> bool:
    return head.done() and not head.cancelled() and head.exception() is None

