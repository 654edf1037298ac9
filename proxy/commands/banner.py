"""What ``paperclip serve`` says at start: where its config came from, where it sends, what is unsafe.

Pure: the CLI logs the lines. Credentials never appear: a proxy is shown as
its address, a ``base_url`` without its query (gateways put keys there).
"""

from __future__ import annotations

import logging
from pathlib import Path
from urllib.parse import urlsplit

from .. import __version__
from ..config import CONFIG_ENV, EMBEDDED_FILE, NO_FILE, Settings, TenantSettings, Upstream


def lines(settings: Settings) -> list[tuple[int, str]]:
    """(logging level, message) pairs, the summary first."""
    everyone = [settings.defaults, *settings.tenants]
    upstreams = sorted({_describe(t.upstream) for t in everyone})
    out = [
        (
            logging.INFO,
            f"paperclip {__version__}: config {_source(settings.source)}; upstream {', '.join(upstreams)}; "
            f"{len(settings.tenants)} tenant(s); passthrough_keys {'on' if settings.passthrough_keys else 'off'}",
        )
    ]
    if not settings.tenants and not settings.passthrough_keys:
        out.append((logging.WARNING, REFUSES_EVERYONE))
    out += [(logging.WARNING, _no_key(t)) for t in settings.tenants if not t.upstream.api_key]
    out += [(logging.WARNING, _no_client_key(t, settings.passthrough_keys)) for t in settings.tenants if not t.api_keys]
    unchecked = sorted({_base(t.upstream) for t in everyone if not t.upstream.verify})
    out += [(logging.WARNING, f"TLS certificates of {url} are not checked (upstream.verify: false)") for url in unchecked]
    return out


REFUSES_EVERYONE = (
    "no tenant is configured and passthrough_keys is off: every request will be refused with 401 "
    "(add a tenant with api_keys, or set passthrough_keys: true to forward clients' own keys)"
)


def _source(source: str) -> str:
    if source == NO_FILE:
        return "none (the built-in defaults)"
    if Path(source) == EMBEDDED_FILE:
        return f"{source} (the built-in proxy.yaml: no --config, no ${CONFIG_ENV}, no ./proxy.yaml)"
    return source


def _describe(up: Upstream) -> str:
    via = up.routes.for_origin(*_origin(up.base_url))
    return _base(up) + (f" via proxy {via.url}" if via else "")


def _base(up: Upstream) -> str:
    return up.base_url.partition("?")[0]


def _origin(url: str) -> tuple[str, str, int]:
    parts = urlsplit(url)
    return parts.scheme, parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)


def _no_client_key(tenant: TenantSettings, passthrough: bool) -> str:
    then = ("a key meant for it is taken for a client's own and forwarded upstream" if passthrough
            else "every request meant for it is refused with 401")
    return (
        f"tenant {tenant.name} has no client key (its api_keys are empty, or each an unset ${{VAR}}): {then}"
    )


def _no_key(tenant: TenantSettings) -> str:
    return (
        f"tenant {tenant.name} has no upstream key (upstream.api_key is unset): "
        "its requests reach the upstream without one"
    )
