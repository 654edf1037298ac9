"""Upstream HTTP clients, header rules, and the one place httpx errors are translated."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import httpx

from .config import Upstream
from .config.outbound import ProxyRules
from .config.tls import TlsSettings
from .errors import (
    PaperclipError,
    UpstreamError,
    UpstreamTimeout,
    UpstreamUnavailable,
    UpstreamUnreachable,
)
from .tenancy import CONTROL_PREFIX, Tenant
from .transport import LeanTransport, Timeouts, UpstreamClient

# RFC 9110 §7.6.1 hop-by-hop headers, plus the ones the transport recomputes.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)
_CREDENTIALS = frozenset({"authorization", "api-key"})
_ACCOUNT = frozenset({"openai-organization", "openai-project"})


def request_headers(
    incoming: Iterable[tuple[str, str]], tenant: Tenant, *, drop: frozenset[str] = frozenset()
) -> list[tuple[str, str]]:
    """The headers to send upstream: hop-by-hop, Paperclip's controls and the client's key removed.

    The client's proxy key is never sent upstream: it is replaced by the
    tenant's upstream key (for a passthrough key, the key itself). When the key
    is swapped, the client's organisation/project headers go too — they belong
    to the client's account, not the tenant's — and the tenant's are set.
    """
    connection_listed = {
        token.strip().lower()
        for name, value in incoming
        if name.lower() == "connection"
        for token in value.split(",")
    }
    out: list[tuple[str, str]] = []
    for name, value in incoming:
        low = name.lower()
        if low in HOP_BY_HOP or low in connection_listed or low in drop:
            continue
        if low.startswith(CONTROL_PREFIX) or low in _CREDENTIALS:
            continue
        if low in _ACCOUNT and not tenant.passthrough:
            continue
        out.append((name, value))
    if tenant.upstream_key:
        out.append(credential(tenant.settings.upstream, tenant.upstream_key))
    if not tenant.passthrough:
        up = tenant.settings.upstream
        if up.organization:
            out.append(("openai-organization", up.organization))
        if up.project:
            out.append(("openai-project", up.project))
    return out


def credential(upstream: Upstream, key: str) -> tuple[str, str]:
    """The header the upstream's key goes in: ``Authorization: Bearer`` or Azure's ``api-key``."""
    return ("api-key", key) if upstream.auth == "api-key" else ("authorization", f"Bearer {key}")


def response_headers(headers: httpx.Headers, *, keep_length: bool) -> list[tuple[bytes, bytes]]:
    """End-to-end response headers, as raw pairs (repeated headers such as set-cookie kept)."""
    listed = {t.strip().lower() for t in headers.get("connection", "").split(",") if t.strip()}
    out: list[tuple[bytes, bytes]] = []
    for name, value in headers.raw:
        low = name.decode("latin-1").lower()
        if low == "content-length" and keep_length:
            out.append((b"content-length", value))
            continue
        if low in HOP_BY_HOP or low in listed:
            continue
        out.append((low.encode("latin-1"), value))
    return out


@functools.lru_cache(maxsize=4096)
def join_url(base_url: str, path: str, query: bytes | str = b"") -> httpx.URL:
    """``base_url`` + the path after the client's ``/v1`` (or the bare path), + both query strings.

    A query in ``base_url`` (``?api-version=...``) is kept, merged with the
    client's (``merge_query``). Cached: httpx parses and validates a URL
    character by character, and the same few URLs come back on every request.
    """
    base, _, base_query = base_url.partition("?")
    tail = path.removeprefix("/v1") if path == "/v1" or path.startswith("/v1/") else path
    url = base.rstrip("/") + tail
    q = merge_query(base_query, query.decode("latin-1") if isinstance(query, bytes) else query)
    return httpx.URL(f"{url}?{q}" if q else url)


def merge_query(configured: str, client: str) -> str:
    """The configured parameters, then the client's; a name the client also sends is the client's.

    Parameters stay as they were encoded; only whole ``name=value`` pairs move.
    """
    if not configured:
        return client
    sent = {part.partition("=")[0] for part in client.split("&") if part}
    kept = [part for part in configured.split("&") if part and part.partition("=")[0] not in sent]
    return "&".join([*kept, *(part for part in client.split("&") if part)])


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

    def __init__(self, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self._clients: dict[_PoolKey, httpx.AsyncClient] = {}
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


def header_map(scope_headers: Iterable[tuple[bytes, bytes]]) -> Mapping[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope_headers}
