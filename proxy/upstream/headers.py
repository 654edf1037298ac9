"""What goes upstream and what comes back, as pure rules: request headers and URL, response headers.

The hop-by-hop headers go both ways. Paperclip's own never cross (SPEC §4,
§9): its controls (``X-Paperclip-*``), the client's credential headers and
Paperclip's keys never go upstream (the tenant's upstream credential is set
after the client's are removed), nor do its cookies or a cookie holding one
of its keys; an upstream's ``X-Paperclip-*`` headers and its cookies in
Paperclip's name space never reach the client.
"""

from __future__ import annotations

import functools
import urllib.parse
from collections.abc import Callable, Iterable, Mapping

import httpx

from ..config import Upstream
from ..tenancy import CONTROL_PREFIX, COOKIE_PREFIX, Tenant, header_text

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


# Where a client's key may come (SPEC §4): always removed; the tenant's credential is set after.
_CREDENTIALS = frozenset({"authorization", "api-key", "x-api-key"})
# Prefixes a browser gives cookie names (RFC 6265bis) that name the same cookie for us.
_COOKIE_NAME_PREFIXES = ("__host-", "__secure-")


_ACCOUNT = frozenset({"openai-organization", "openai-project"})


def request_headers(
    incoming: Iterable[tuple[str, str]],
    tenant: Tenant,
    *,
    ours: Callable[[str], bool],
    drop: frozenset[str] = frozenset(),
    anthropic: bool = False,
) -> list[tuple[str, str]]:
    """The headers to send upstream: hop-by-hop, Paperclip's controls, keys and cookies removed.

    The client's proxy key is never sent upstream: it is replaced by the
    tenant's upstream key (for a passthrough key, the key itself). When the key
    is swapped, the client's organisation/project headers go too — they belong
    to the client's account, not the tenant's — and the tenant's are set.
    ``anthropic``: the request goes to Anthropic's API, with the tenant's
    ``anthropic.api_key`` (``anthropic_credential``); ``anthropic-version`` and
    ``anthropic-beta`` pass as the client sent them.
    ``ours`` tells a value that is one of Paperclip's keys (or nearly one):
    a cookie holding one is removed, as are Paperclip's own cookies.
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
        if low == "cookie":
            value = forwarded_cookies(value, ours)
            if not value:
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


def forwarded_cookies(header: str, ours: Callable[[str], bool]) -> str:
    """A ``Cookie`` header without Paperclip's cookies and without any cookie whose value is its key.

    A value is judged as sent and URL-decoded (``Bearer%20<key>`` is the key:
    servers and browsers' scripts percent-encode cookie values).
    """
    kept = []
    for pair in header.split(";"):
        value = pair.strip().partition("=")[2]
        if not pair.strip() or is_paperclip_cookie(cookie_name(pair)) or any(ours(v) for v in cookie_values(value)):
            continue
        kept.append(pair.strip())
    return "; ".join(kept)


# Percent-encoding undone at most this many times (``%2520`` is ``%20`` encoded again).
_DECODINGS = 3


def cookie_values(value: str) -> list[str]:
    """A cookie's value as sent (without quotes), then URL-decoded (``%xx``, again while that changes it),
    and each of these with ``+`` read as a space."""
    forms = [value.strip().strip('"')]
    for _ in range(_DECODINGS):
        decoded = urllib.parse.unquote(forms[-1])
        if decoded == forms[-1]:
            break
        forms.append(decoded)
    return forms + [f.replace("+", " ") for f in forms if "+" in f]


def cookie_name(pair: str) -> str:
    """The name a browser gives a cookie's ``name=value`` (of ``Cookie``, or ``Set-Cookie`` before its ``;``).

    A nameless cookie (``=paperclip_ui=x``; RFC 6265bis §5.6: an empty name,
    the rest its value) is stored by browsers and sent back as its bare value,
    ``paperclip_ui=x``, which a server reads as a cookie named ``paperclip_ui``:
    its name is the part of its value before the ``=``. A pair without ``=``
    is sent back as it is: all of it is the name.
    """
    return pair.partition(";")[0].lstrip(" \t=").partition("=")[0].strip()


def is_paperclip_cookie(name: str) -> bool:
    """A cookie named in Paperclip's space (``paperclip…``, also as ``__Host-`` / ``__Secure-``, any case)."""
    low = name.strip().lower()
    for prefix in _COOKIE_NAME_PREFIXES:
        low = low.removeprefix(prefix)
    return low.startswith(COOKIE_PREFIX)


def response_headers(headers: httpx.Headers, *, keep_length: bool) -> list[tuple[bytes, bytes]]:
    """End-to-end response headers, as raw pairs (repeated headers such as set-cookie kept).

    An upstream's ``X-Paperclip-*`` headers and cookies in Paperclip's name
    space are dropped: only the proxy speaks for itself.
    """
    listed = {t.strip().lower() for t in headers.get("connection", "").split(",") if t.strip()}
    out: list[tuple[bytes, bytes]] = []
    for name, value in headers.raw:
        low = name.decode("latin-1").lower()
        if low == "content-length" and keep_length:
            out.append((b"content-length", value))
            continue
        if low in HOP_BY_HOP or low in listed or low.startswith(CONTROL_PREFIX):
            continue
        if low == "set-cookie" and is_paperclip_cookie(cookie_name(value.decode("latin-1"))):
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
    """The request's headers by lower-case name, to read (values as ``header_text`` reads them)."""
    out = {}
    for k, v in scope_headers:
        name = k.decode("latin-1").lower()
        out[name] = header_text(name, v)
    return out
