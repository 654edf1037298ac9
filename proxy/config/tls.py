"""TLS for an upstream: which CAs it is checked against and which client certificate it is shown.

One ``ssl.SSLContext`` per distinct setting, made once (``config`` makes it
while validating, so a bad file is a config error, and the transport gets the
same object). ``ca_file`` replaces the default trust (certifi, or
``SSL_CERT_FILE``) rather than adding to it, as curl's ``--cacert`` does: a
private gateway's CA is the one that should vouch for it.
"""

from __future__ import annotations

import functools
import ssl
from dataclasses import dataclass

import httpx


@dataclass(frozen=True)
class TlsSettings:
    ca_file: str | None = None
    client_cert: str | None = None
    client_key: str | None = None
    verify: bool = True


DEFAULT_TLS = TlsSettings()


@functools.lru_cache(maxsize=64)
def ssl_context(tls: TlsSettings) -> ssl.SSLContext:
    """The context for these settings; ``ssl.SSLError`` / ``OSError`` for a bad or missing file."""
    if not tls.verify:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif tls.ca_file:
        context = ssl.create_default_context(cafile=tls.ca_file)
    else:
        context = httpx.create_ssl_context()
    if tls.client_cert:
        context.load_cert_chain(tls.client_cert, tls.client_key)
    context.set_alpn_protocols(["http/1.1"])  # the transport speaks nothing else
    return context
