"""Upstream HTTP clients, one per connection profile, and the one place httpx errors are translated."""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from ..config import Upstream
from ..config.outbound import ProxyRules
from ..config.schema import MAX_RECORD_BYTES
from ..config.tls import TlsSettings
from ..errors import (
    PaperclipError,
    UpstreamError,
    UpstreamTimeout,
    UpstreamUnavailable,
    UpstreamUnreachable,
)
from .wire.transport import LeanTransport, Timeouts, UpstreamClient


@dataclass(frozen=True)
class _PoolKey:
    connect: float
    read: float
    tls: TlsSettings
    routes: ProxyRules


class Upstreams:
    """One pooled client per connection profile (timeouts, TLS, proxies), shared by every upstream URL.

    The client pools connections per origin (``transport.LeanTransport``), so
    tenants on the same provider share keep-alive connections. Timeouts are per
    phase: connect, and *read between chunks* — never a total deadline, so long
    streams live.
    """

    def __init__(self, transport: httpx.AsyncBaseTransport | None = None, max_read_bytes: int = MAX_RECORD_BYTES) -> None:
        self._clients: dict[_PoolKey, httpx.AsyncClient] = {}
        self._max_read = max_read_bytes  # a reply read whole (the compression model's) is bounded so
        # By the settings object itself (kept alive here, so its id stays its own): hashing the
        # profile's nested settings costs ~15 µs, and every request asks.
        self._known: dict[int, tuple[Upstream, httpx.AsyncClient]] = {}
        self._transport = transport

    def client(self, upstream: Upstream) -> httpx.AsyncClient:
        known = self._known.get(id(upstream))
        if known is not None and known[0] is upstream:
            return known[1]
        found = self._profile_client(upstream)
        self._known[id(upstream)] = (upstream, found)
        return found

    def _profile_client(self, upstream: Upstream) -> httpx.AsyncClient:
        key = _PoolKey(upstream.connect_timeout_s, upstream.read_timeout_s, upstream.tls, upstream.routes)
        found = self._clients.get(key)
        if found is None:
            timeouts = Timeouts(connect=key.connect, read=key.read, write=key.read, pool=key.connect)
            found = UpstreamClient(
                self._transport or LeanTransport(timeouts, tls=key.tls, routes=key.routes),
                httpx.Timeout(connect=key.connect, read=key.read, write=key.read, pool=key.connect),
                self._max_read,
            )
            self._clients[key] = found
        return found

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()
        self._clients.clear()
        self._known.clear()


def translate(exc: BaseException) -> PaperclipError:
    """httpx's exception tree → Paperclip's (the only place this happens)."""
    if isinstance(exc, httpx.ProxyError):
        return UpstreamUnreachable(f"The upstream could not be reached through the outbound proxy: {exc}")
    if isinstance(exc, httpx.PoolTimeout):
        return UpstreamUnavailable("The upstream connection pool is exhausted; try again.")
    if isinstance(exc, httpx.TimeoutException):
        return UpstreamTimeout(f"The upstream did not answer in time ({type(exc).__name__}).")
    if isinstance(exc, httpx.ConnectError | httpx.RemoteProtocolError | httpx.NetworkError):
        return UpstreamUnreachable(f"The upstream could not be reached ({type(exc).__name__}).")
    if isinstance(exc, PaperclipError):
        return exc
    return UpstreamError(f"Upstream request failed ({type(exc).__name__}).")


