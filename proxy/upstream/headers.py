"""What goes upstream and what comes back, as pure rules: request headers and URL, response headers.

The hop-by-hop headers go both ways; Paperclip's controls and the client's
key never go upstream (the tenant's upstream key does).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping

import httpx

from ..config import Upstream
from ..tenancy import CONTROL_PREFIX, Tenant

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


_CREDENTIALS = frozenset({"authorization", "api-key", "x-api-key"})


_ACCOUNT = frozenset({"openai-organization", "openai-project"})


def request_headers(
    incoming: Iterable[tuple[str, str]],
    tenant: Tenant,
    *,
    drop: frozenset[str] = frozenset(),
    anthropic: bool = False,
) -> list[tuple[str, str]]:
    """The headers to send upstream: hop-by-hop, Paperclip's controls and the client's key removed.

    The client's proxy key is never sent upstream: it is replaced by the
    tenant's upstream key (for a passthrough key, the key itself). When the key
    is swapped, the client's organisation/project headers go too — they belong
    to the client's account, not the tenant's — and the tenant's are set.
    ``anthropic``: the request goes to Anthropic's API, with the tenant's
    ``anthropic.api_key`` (``anthropic_credential``); ``anthropic-version`` and
    ``anthropic-beta`` pass as the client sent them.
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
    if anthropic:
        if tenant.anthropic_key:
            out.append(anthropic_credential(incoming, tenant, tenant.anthropic_key))
        return out
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


def anthropic_credential(incoming: Iterable[tuple[str, str]], tenant: Tenant, key: str) -> tuple[str, str]:
    """Anthropic's ``x-api-key``; a passthrough client's ``Authorization: Bearer`` (an OAuth token) stays one."""
    bearer = any(name.lower() == "authorization" for name, _ in incoming)
    return ("authorization", f"Bearer {key}") if tenant.passthrough and bearer else ("x-api-key", key)


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


def anthropic_url(base_url: str, path: str, query: bytes | str = b"") -> httpx.URL:
    """Anthropic's URL of a client's path: ``/v1/messages`` (or ``/messages``) under ``base_url``'s ``/v1``.

    Anthropic's base URL names the host (``https://api.anthropic.com``), not its
    ``/v1``; a base URL that already ends in ``/v1`` is taken as it is.
    """
    base, mark, base_query = base_url.partition("?")
    versioned = base if base.rstrip("/").endswith("/v1") else base.rstrip("/") + "/v1"
    return join_url(versioned + mark + base_query, path if path.startswith("/v1") else "/v1" + path, query)


def speaks_anthropic(path: str, headers: Mapping[str, str]) -> bool:
    """Whether a request is for Anthropic's API: its Messages paths, or any path its SDKs call
    (they send ``anthropic-version`` on every request)."""
    return path in ("/v1/messages", "/messages") or path.startswith("/v1/messages/") or "anthropic-version" in headers


def header_map(scope_headers: Iterable[tuple[bytes, bytes]]) -> Mapping[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope_headers}
