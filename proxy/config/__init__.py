"""Configuration: ``proxy.yaml`` (+ ``tenants_dir``), validated once at start.

This package is the only code that reads the environment (``${VAR}`` in the
file, and the outbound proxy variables). Everything it returns is frozen;
handlers receive it through the app factory. A bad file raises
:class:`ConfigError` naming the file, the key and what is wrong; the CLI turns
that into exit status 2 before anything starts.

``schema`` holds every key with its default and the settings objects,
``loading`` reads and merges the files, ``fields`` checks single values,
``upstream_settings`` the upstream section (URL, proxy, TLS), ``environment``
the proxy variables; ``outbound`` (which proxy reaches an origin) and ``tls``
(the SSL context of a TLS setting) are the value types the transport reads.
"""

from .loading import build, from_dict, load
from .schema import (
    DEFAULTS,
    TOP_DEFAULTS,
    Anthropic,
    Compression,
    Context,
    Memory,
    Server,
    Settings,
    TenantSettings,
    Upstream,
)

__all__ = [
    "DEFAULTS",
    "TOP_DEFAULTS",
    "Anthropic",
    "Compression",
    "Context",
    "Memory",
    "Server",
    "Settings",
    "TenantSettings",
    "Upstream",
    "build",
    "from_dict",
    "load",
]
