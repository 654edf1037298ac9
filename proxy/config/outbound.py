"""Which outbound HTTP proxy, if any, reaches an upstream origin: pure rules, no I/O.

The rules come from ``upstream.proxy`` (one proxy for every origin) or from
the environment (``HTTPS_PROXY`` / ``HTTP_PROXY`` / ``ALL_PROXY`` by the
upstream's scheme, minus ``NO_PROXY``); ``config`` reads them, the transport
asks ``ProxyRules.for_origin`` once per origin. ``NO_PROXY`` is matched as curl
and Go do: ``*`` is everything; an entry matches that host and its subdomains
(a leading ``.`` or ``*.`` changes nothing); ``host:port`` only that port; an IP
network in CIDR form every address inside it.
"""

from __future__ import annotations

import base64
import ipaddress
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit


@dataclass(frozen=True)
class OutboundProxy:
    """An HTTP proxy: where it listens and the ``Proxy-Authorization`` it wants, if any."""

    host: str
    port: int
    authorization: str | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


@dataclass(frozen=True)
class ProxyRules:
    http: OutboundProxy | None = None
    https: OutboundProxy | None = None
    no_proxy: tuple[str, ...] = ()

    def for_origin(self, scheme: str, host: str, port: int) -> OutboundProxy | None:
        """The proxy for ``scheme://host:port``, or ``None`` for a direct connection."""
        chosen = self.https if scheme == "https" else self.http
        if chosen is None or bypassed(self.no_proxy, host, port):
            return None
        return chosen


DIRECT = ProxyRules()


def parse_proxy(text: str) -> OutboundProxy:
    """``[http://][user:password@]host[:port]`` → an ``OutboundProxy``; ``ValueError`` says what is wrong."""
    raw = text.strip()
    parts = urlsplit(raw if "://" in raw else "http://" + raw)
    if parts.scheme != "http":
        raise ValueError(f"only http:// proxies are supported (HTTP CONNECT), not {parts.scheme}://")
    try:
        port = parts.port or 80
    except ValueError as exc:
        raise ValueError(f"{text!r} has an invalid port") from exc
    if not parts.hostname or parts.path not in ("", "/") or parts.query:
        raise ValueError(f"{text!r} is not a proxy address (http://[user:password@]host:port)")
    auth = None
    if parts.username is not None:
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        auth = "Basic " + base64.b64encode(pair.encode()).decode("ascii")
    return OutboundProxy(parts.hostname, port, auth)


def parse_no_proxy(text: str) -> tuple[str, ...]:
    return tuple(e.strip().lower() for e in text.replace(" ", ",").split(",") if e.strip())


def bypassed(no_proxy: tuple[str, ...], host: str, port: int) -> bool:
    """Whether ``host:port`` is reached directly under these ``NO_PROXY`` entries."""
    host = host.lower().strip("[]").rstrip(".")
    return any(_matches(entry, host, port) for entry in no_proxy)


def _matches(entry: str, host: str, port: int) -> bool:
    if entry == "*":
        return True
    network = _network(entry)
    if network is not None:
        address = _address(host)
        return address is not None and address in network
    name, _, entry_port = entry.rpartition(":") if _has_port(entry) else (entry, "", "")
    if entry_port and entry_port != str(port):
        return False
    name = name.strip("[]").removeprefix("*").removeprefix(".").rstrip(".")
    return bool(name) and (host == name or host.endswith("." + name))


def _has_port(entry: str) -> bool:
    tail = entry.rpartition(":")[2]
    return ":" in entry and tail.isdigit() and (entry.count(":") == 1 or entry.startswith("["))


def _network(entry: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    try:
        return ipaddress.ip_network(entry.strip("[]"), strict=False)
    except ValueError:
        return None


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None
