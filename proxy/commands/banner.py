"""What ``paperclip serve`` says at start: where its config came from, where it sends, what is unsafe.

Pure: the CLI logs the lines. Credentials never appear: a proxy is shown as
its address, a ``base_url`` without its query (gateways put keys there).
"""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

from .. import __version__
from ..config import Settings, TenantSettings, Upstream


def lines(settings: Settings) -> list[tuple[int, str]]:
    """(logging level, message) pairs, the summary first."""
    everyone = [settings.defaults, *settings.tenants]
    upstreams = sorted({_describe(t.upstream) for t in everyone})
    source = "built-in defaults" if settings.source == "<defaults>" else settings.source
    out = [
        (
            logging.INFO,
            f"paperclip {__version__}: config {source}; upstream {', '.join(upstreams)}; "
            f"{len(settings.tenants)} tenant(s); passthrough_keys {'on' if settings.passthrough_keys else 'off'}",
        )
    ]
    if not settings.passthrough_keys:
        out += [(logging.WARNING, _no_key(t)) for t in settings.tenants or [settings.defaults] if not t.upstream.api_key]
    unchecked = sorted({_base(t.upstream) for t in everyone if not t.upstream.verify})
    out += [(logging.WARNING, f"TLS certificates of {url} are not checked (upstream.verify: false)") for url in unchecked]
    return out


def _describe(up: Upstream) -> str:
    via = up.routes.for_origin(*_origin(up.base_url))
    return _base(up) + (f" via proxy {via.url}" if via else "")


def _base(up: Upstream) -> str:
    return up.base_url.partition("?")[0]


def _origin(url: str) -> tuple[str, str, int]:
    parts = urlsplit(url)
    return parts.scheme, parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)


def _no_key(tenant: TenantSettings) -> str:
    who = "defaults" if tenant.name == "defaults" else f"tenant {tenant.name}"
    return (
        f"{who} has no upstream key (upstream.api_key is unset) and passthrough_keys is off: "
        "its requests reach the upstream without one"
    )
