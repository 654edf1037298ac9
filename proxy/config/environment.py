"""The outbound proxy settings of the environment: the variables curl, Go and Python's tools read.

Lower case wins over upper case where both are set (as curl and urllib do);
an empty value is unset. ``ALL_PROXY`` serves a scheme that has no variable of
its own. The environment is read here and nowhere else at run time.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import ConfigError
from .outbound import OutboundProxy, ProxyRules, parse_no_proxy, parse_proxy

SOURCE = "<environment>"


def proxy_rules(env: Mapping[str, str]) -> ProxyRules:
    return ProxyRules(
        http=_proxy(env, "http_proxy") or _proxy(env, "all_proxy"),
        https=_proxy(env, "https_proxy") or _proxy(env, "all_proxy"),
        no_proxy=parse_no_proxy(_get(env, "no_proxy")[1]),
    )


def _proxy(env: Mapping[str, str], name: str) -> OutboundProxy | None:
    found, value = _get(env, name)
    if not value:
        return None
    try:
        return parse_proxy(value)
    except ValueError as exc:
        raise ConfigError(SOURCE, found, f"{exc}; set upstream.proxy, or NO_PROXY for this upstream") from exc


def _get(env: Mapping[str, str], name: str) -> tuple[str, str]:
    for variant in (name, name.upper()):
        if env.get(variant):
            return variant, env[variant]
    return name.upper(), ""
