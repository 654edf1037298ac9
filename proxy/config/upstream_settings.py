"""The ``upstream`` section: its URL, how the key is sent, the proxy and TLS it is reached with."""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .fields import section
from .outbound import ProxyRules, parse_proxy
from .schema import Upstream
from .tls import ssl_context

_FILES = ("ca_file", "client_cert", "client_key")


def upstream(values: Mapping[str, Any], source: str, where: str, env_routes: ProxyRules) -> Upstream:
    """The checked section (its files already made absolute by ``anchor_files``)."""
    up = section(Upstream, values, source, where, routes=env_routes)
    if up.proxy:
        try:
            chosen = parse_proxy(up.proxy)
        except ValueError as exc:
            raise ConfigError(source, f"{where}.proxy", str(exc)) from exc
        up = replace(up, routes=ProxyRules(http=chosen, https=chosen))
    for name in _FILES:
        _exists(getattr(up, name), source, f"{where}.{name}")
    if up.client_key and not up.client_cert:
        raise ConfigError(source, f"{where}.client_key", "is set without upstream.client_cert")
    try:
        ssl_context(up.tls)  # made once here, so a bad certificate stops the start
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(source, f"{where}.{_culprit(up)}", f"cannot use it for TLS: {exc}") from exc
    return up


def anchor_files(body: Any, base_dir: Path | None) -> Any:
    """A tenant's (or ``defaults``') raw body with its upstream's relative files under ``base_dir``.

    A relative path is found beside the file that names it, so a tenant that
    inherits ``defaults``' CA file gets the one the main config meant.
    """
    up = body.get("upstream") if isinstance(body, Mapping) else None
    if not isinstance(up, Mapping) or base_dir is None:
        return body
    anchored = {
        k: str(base_dir / Path(v).expanduser()) if k in _FILES and isinstance(v, str) and v else v
        for k, v in up.items()
    }
    return {**body, "upstream": anchored}


def _exists(value: str | None, source: str, key: str) -> None:
    if value is not None and not Path(value).is_file():
        raise ConfigError(source, key, f"no such file: {value}")


def _culprit(up: Upstream) -> str:
    return "client_cert" if up.client_cert else "ca_file"
