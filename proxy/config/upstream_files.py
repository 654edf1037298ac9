"""An upstream's files: found beside the config file that names them, and checked to make a TLS context.

The schema checks what a value is; these checks need the file system, so
the loader runs them once a section is valid.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from .schema import Upstream
from .tls import TlsSettings, ssl_context

FILES = ("ca_file", "client_cert", "client_key")


def anchor_files(body: Any, base_dir: Path | None) -> Any:
    """A tenant's (or ``defaults``') raw body with its upstream's relative files under ``base_dir``.

    A relative path is found beside the file that names it, so a tenant that
    inherits ``defaults``' CA file gets the one the main config meant.
    """
    up = body.get("upstream") if isinstance(body, Mapping) else None
    if not isinstance(up, Mapping) or base_dir is None:
        return body
    anchored = {
        k: str(base_dir / Path(v).expanduser()) if k in FILES and isinstance(v, str) and v else v
        for k, v in up.items()
    }
    return {**body, "upstream": anchored}


def file_problems(up: Upstream) -> Iterator[tuple[str, str]]:
    """(key within ``upstream``, problem) for each file that is missing or cannot be used for TLS."""
    missing = [name for name in FILES if getattr(up, name) is not None and not Path(getattr(up, name)).is_file()]
    for name in missing:
        yield name, f"no such file: {getattr(up, name)}"
    if up.client_key and not up.client_cert:
        yield "client_key", "is set without upstream.client_cert"
        return
    if missing:
        return
    culprit = _unusable(up)
    if culprit is not None:
        yield culprit


def _unusable(up: Upstream) -> tuple[str, str] | None:
    """The key whose file the TLS context cannot be made from, and why (made once here, so a start stops)."""
    for name, tls in (("ca_file", TlsSettings(ca_file=up.ca_file, verify=up.verify)), ("client_cert", up.tls)):
        try:
            ssl_context(tls)
        except (ssl.SSLError, OSError) as exc:
            return name, f"cannot use it for TLS: {exc}"
    return None
