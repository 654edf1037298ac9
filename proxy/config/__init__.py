"""Configuration: ``proxy.yaml`` (+ ``tenants_dir``), validated once at start.

This package is the only code that reads the environment (``${VAR}`` in the
file, and the outbound proxy variables). Everything it returns is frozen;
handlers receive it through the app factory. A bad file raises
:class:`ConfigError` with every problem in it, each naming the file, the key
and what is wrong; the CLI turns that into exit status 2 before anything
starts.

``schema`` declares every key with its default, bounds and meaning (the
sections' pydantic models), ``values`` the value types it uses,
``loading`` reads and merges the files, ``problems`` says pydantic's errors
in the config's words, ``interpolation`` expands ``${VAR}``,
``upstream_files`` checks an upstream's files, ``environment`` reads the
proxy variables, ``reference`` renders the schema as Markdown; ``outbound``
(which proxy reaches an origin) and ``tls`` (the SSL context of a TLS
setting) are the value types the transport reads.
"""

from .loading import CONFIG_ENV, EMBEDDED_FILE, NO_FILE, build, find_file, from_dict, load
from .schema import (
    Compression,
    Context,
    Defaults,
    Embedding,
    Memory,
    Server,
    Settings,
    Storage,
    TenantSettings,
    Traces,
    Upstream,
)

__all__ = [
    "CONFIG_ENV",
    "EMBEDDED_FILE",
    "NO_FILE",
    "Compression",
    "Context",
    "Defaults",
    "Embedding",
    "Memory",
    "Server",
    "Settings",
    "Storage",
    "TenantSettings",
    "Traces",
    "Upstream",
    "build",
    "find_file",
    "from_dict",
    "load",
]
