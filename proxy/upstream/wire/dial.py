"""Opening an upstream connection: directly, or through an outbound HTTP proxy; TLS either way.

Through a proxy, an ``https`` origin gets a tunnel (``CONNECT host:port``,
then TLS with the origin inside it, so the proxy sees neither the key nor the
conversation); an ``http`` origin gets its requests in absolute form
(``POST http://host/...``) with the proxy's credentials on each, as HTTP/1.1
forwarding is done. Every step runs inside the caller's connect timeout.
"""

from __future__ import annotations

import asyncio
import ssl

import httpx

from ...config.outbound import OutboundProxy
from .http11 import Connection

_MAX_TUNNEL_HEAD = 16 * 1024


async def connect(conn: Connection, via: OutboundProxy | None, tls: ssl.SSLContext | None) -> None:
    """Connect ``conn`` to its origin; ``tls`` is set for an ``https`` origin."""
    loop = asyncio.get_running_loop()
    _, host, port = conn.origin
    name = host.decode("ascii")
    if via is None:
        transport, _ = await loop.create_connection(
            lambda: conn, name, port, ssl=tls, server_hostname=name if tls else None
        )
        conn.transport = transport  # uvloop calls connection_made a tick later
        return
    if tls is None:  # plain http through the proxy: the proxy forwards each request
        transport, _ = await loop.create_connection(lambda: conn, via.host, via.port)
        conn.transport = transport
        conn.forward_proxy_auth = (via.authorization or "").encode("latin-1")
        return
    handshake = _TunnelHandshake(loop)
    raw, _ = await loop.create_connection(lambda: handshake, via.host, via.port)
    try:
        target = f"{_authority(name)}:{port}".encode("ascii")
        auth = b"proxy-authorization: %b\r\n" % via.authorization.encode("latin-1") if via.authorization else b""
        raw.write(b"CONNECT %b HTTP/1.1\r\nhost: %b\r\n%b\r\n" % (target, target, auth))
        status, reason = await handshake.answer
        if not 200 <= status < 300:  # any 2xx opens the tunnel (RFC 9110 §9.3.6)
            raise httpx.ProxyError(f"the outbound proxy refused the tunnel to {name}:{port}: {status} {reason}")
        secured = await loop.start_tls(raw, conn, tls, server_hostname=name)
    except BaseException:
        raw.close()
        raise
    if secured is None:
        raise httpx.ConnectError(f"the TLS handshake with {name} through the proxy did not complete")
    conn.transport = secured


def _authority(host: str) -> str:
    return f"[{host}]" if ":" in host else host


class _TunnelHandshake(asyncio.Protocol):
    """Reads the proxy's answer to ``CONNECT``: its status line, up to the blank line."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.answer: asyncio.Future[tuple[int, str]] = loop.create_future()
        self._head = b""

    def data_received(self, data: bytes) -> None:
        self._head += data
        if b"\r\n\r\n" in self._head:
            line = self._head.split(b"\r\n", 1)[0].decode("latin-1")
            parts = line.split(" ", 2)
            if len(parts) < 2 or not parts[1].isdigit():
                self._settle(httpx.ProxyError(f"the outbound proxy answered CONNECT with {line!r}"))
            else:
                self._settle((int(parts[1]), parts[2] if len(parts) > 2 else ""))
        elif len(self._head) > _MAX_TUNNEL_HEAD:
            self._settle(httpx.ProxyError("the outbound proxy's answer to CONNECT is too long"))

    def connection_lost(self, exc: Exception | None) -> None:
        self._settle(httpx.ProxyError("the outbound proxy closed the connection during CONNECT"))

    def _settle(self, result: tuple[int, str] | Exception) -> None:
        if self.answer.done():
            return
        if isinstance(result, Exception):
            self.answer.set_exception(result)
        else:
            self.answer.set_result(result)
