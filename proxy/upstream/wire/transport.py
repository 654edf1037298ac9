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

Connections open directly or through an outbound HTTP proxy (``dial``), with
the upstream's TLS settings (``tls``); where no proxy applies nothing on the
request path changes. Every request goes this way, ``HEAD`` too (its response
ends with its head, ``http11``), so every response head meets the same bounds.
What it does not do: protocol upgrades (``Upgrade`` is hop-by-hop, never sent
upstream by the proxy; a request with one is refused) and HTTP/2 (see
docs/decisions/0005-upstream-transport.md).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import httpx

from ...config.outbound import DIRECT, OutboundProxy, ProxyRules
from ...config.tls import DEFAULT_TLS, TlsSettings, ssl_context
from ...content_coding import decode
from ...errors import UndecodableBody
from .dial import connect
from .http11 import Body, Connection, send_request, wait
from .pool import ConnectionPool, Origin


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
        tls: TlsSettings = DEFAULT_TLS,
        routes: ProxyRules = DIRECT,
    ) -> None:
        self._timeouts = timeouts
        self._pool = ConnectionPool(max_connections, max_keepalive, keepalive_expiry)
        self._tls = tls
        self._routes = routes
        self._via: dict[Origin, OutboundProxy | None] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        origin = (url.raw_scheme, url.raw_host, url.port or (443 if url.raw_scheme == b"https" else 80))
        if "upgrade" in request.headers:
            raise httpx.UnsupportedProtocol("protocol upgrades are not relayed to the upstream", request=request)
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

    def _route(self, origin: Origin) -> OutboundProxy | None:
        if origin not in self._via:
            scheme, host, port = origin
            self._via[origin] = self._routes.for_origin(scheme.decode(), host.decode("ascii"), port)
        return self._via[origin]

    async def _connect(self, origin: Origin, request: httpx.Request, t: Timeouts) -> Connection:
        tls = ssl_context(self._tls) if origin[0] == b"https" else None
        conn = Connection(origin)
        self._pool.opened()
        try:
            async with asyncio.timeout(t.connect):
                await connect(conn, self._route(origin), tls)
        except TimeoutError as exc:
            self._pool.release(conn)
            raise httpx.ConnectTimeout("connecting to the upstream timed out", request=request) from exc
        except OSError as exc:
            self._pool.release(conn)
            raise httpx.ConnectError(f"cannot connect to the upstream: {exc}", request=request) from exc
        except httpx.TransportError as exc:
            self._pool.release(conn)
            exc.request = request
            raise
        except BaseException:
            self._pool.release(conn)
            raise
        return conn

    async def _exchange(
        self, conn: Connection, request: httpx.Request, body: bytes | None, t: Timeouts
    ) -> httpx.Response:
        head_future = conn.start(asyncio.get_running_loop(), head_only=request.method == "HEAD")
        try:
            try:
                await send_request(conn, request, body, t.write)
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
        await asyncio.sleep(0)  # the sockets close in the loop's next turn: let it come before shutdown


class UpstreamClient(httpx.AsyncClient):
    """An ``AsyncClient`` whose ``send`` goes straight to its transport.

    The upstream hop has no auth flow, redirects or hooks, and must not keep
    cookies: one client is shared by every tenant on a timeout profile, so a
    cookie jar would carry one tenant's upstream cookies into another's
    requests. Skipping that machinery is also most of what ``send`` costs.

    A reply read whole (``stream=False``: the compression model's) is read and
    decoded up to ``max_read_bytes`` (``server.max_record_bytes``), past which
    it is an error: an upstream's gzip bomb never inflates in memory.
    """

    def __init__(self, transport: httpx.AsyncBaseTransport, timeout: httpx.Timeout, max_read_bytes: int) -> None:
        super().__init__(transport=transport, timeout=timeout, follow_redirects=False, trust_env=False,
                         headers={"accept-encoding": "gzip, deflate"})  # what ``decode`` reads
        self._direct = transport
        self._max_read = max_read_bytes

    async def send(self, request: httpx.Request, *, stream: bool = False, **_: Any) -> httpx.Response:
        response = await self._direct.handle_async_request(request)
        response.request = request
        if stream:
            return response
        try:
            return await read_whole(response, self._max_read)
        finally:
            await response.aclose()


async def read_whole(response: httpx.Response, limit: int) -> httpx.Response:
    """``response`` read to its end and decoded, as a response of those bytes; past ``limit``, an error."""
    try:
        body = response.content  # a reply made in memory (an in-process transport's): read and decoded already
    except httpx.ResponseNotRead:
        body = await _read_decoded(response, limit)
    if len(body) > limit:
        raise httpx.DecodingError(f"the upstream's reply exceeds {limit} bytes", request=response.request)
    headers = [(k, v) for k, v in response.headers.raw if k.lower() not in (b"content-encoding", b"content-length")]
    return httpx.Response(response.status_code, headers=headers, content=body, request=response.request,
                          extensions=response.extensions)


async def _read_decoded(response: httpx.Response, limit: int) -> bytes:
    raw = bytearray()
    async for part in response.aiter_raw():
        raw += part
        if len(raw) > limit:
            raise httpx.DecodingError(f"the upstream's reply exceeds {limit} bytes", request=response.request)
    try:
        return decode(bytes(raw), response.headers.get("content-encoding"), limit)
    except UndecodableBody as exc:
        raise httpx.DecodingError(f"the upstream's reply cannot be read: {exc}", request=response.request) from exc


def _answered(head: asyncio.Future[tuple[int, list[tuple[bytes, bytes]]]]) -> bool:
    return head.done() and not head.cancelled() and head.exception() is None

