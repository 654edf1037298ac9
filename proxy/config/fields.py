"""Checking one value of the config: its type, its range or choices, its form (URLs, keys)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import fields
from typing import Any, TypeVar
from urllib.parse import urlsplit

from ..errors import ConfigError

CHOICES: dict[str, tuple[str, ...]] = {
    "compression_mode": ("background", "inline"),
    "scope": ("user", "session"),
    "position": ("last_user", "system_tail", "system_head"),
    "pii": ("mask", "keep", "drop"),
    "auth": ("bearer", "api-key"),
    "log_format": ("text", "json"),
    "backend": ("auto", "onnx", "torch"),
}
_FRACTIONS = {"vector_weight", "bm25_weight", "dedup_cosine", "importance_weight"}
_NONNEG = {"temperature"}
_URLS = {"base_url"}

T = TypeVar("T")


def section(cls: type[T], values: Mapping[str, Any], source: str, where: str, **given: Any) -> T:
    """``cls`` from a merged section, each field checked; ``given`` fills fields not read from the file."""
    kwargs: dict[str, Any] = dict(given)
    for f in fields(cls):  # type: ignore[arg-type]
        if f.name not in given:
            kwargs[f.name] = check(f.name, f.type, values[f.name], source, f"{where}.{f.name}")
    return cls(**kwargs)


def check(name: str, kind: Any, value: Any, source: str, key: str) -> Any:
    text = str(kind)
    optional = "None" in text
    if value is None or value == "":
        if optional:
            return None
        raise ConfigError(source, key, "must be set")
    if name in CHOICES:
        return choice(value, CHOICES[name], source, key)
    if text.startswith("bool"):
        return typed(value, bool, source, key)
    if text.startswith("int"):
        return positive(value, source, key)
    if text.startswith("float"):
        return _float(name, value, source, key)
    if name in _URLS:
        return url(value, source, key)
    return typed(value, str, source, key)


def choice(value: Any, allowed: tuple[str, ...], source: str, key: str) -> Any:
    if value not in allowed:
        raise ConfigError(source, key, f"must be one of {', '.join(allowed)}, not {value!r}")
    return value


def _float(name: str, value: Any, source: str, key: str) -> float:
    number = _number(value, source, key)
    if name in _FRACTIONS and not 0 <= number <= 1:
        raise ConfigError(source, key, f"must be between 0 and 1, not {value!r}")
    if name not in _NONNEG and name not in _FRACTIONS and number <= 0:
        raise ConfigError(source, key, f"must be positive, not {value!r}")
    if number < 0:
        raise ConfigError(source, key, f"must not be negative, not {value!r}")
    return number


def url(value: Any, source: str, key: str) -> str:
    """An ``http(s)://host[:port][/path][?query]`` URL, as the upstream's ``base_url`` must be."""
    text = typed(value, str, source, key)
    try:
        parts = urlsplit(text)
        _ = parts.port  # raises on a port that is not a number
    except ValueError as exc:
        raise ConfigError(source, key, f"not a valid URL: {text!r} ({exc})") from exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(source, key, f"must be an http:// or https:// URL with a host, not {text!r}")
    if parts.fragment or any(c.isspace() for c in text):
        raise ConfigError(source, key, f"not a valid URL: {text!r}")
    return text


def typed(value: Any, kind: type[T], source: str, key: str) -> T:
    if kind is int and isinstance(value, bool):
        raise ConfigError(source, key, f"must be an integer, not {value!r}")
    if not isinstance(value, kind):
        raise ConfigError(source, key, f"must be {kind.__name__}, not {value!r}")
    return value


def positive(value: Any, source: str, key: str) -> int:
    number = typed(value, int, source, key)
    if number <= 0:
        raise ConfigError(source, key, f"must be a positive integer, not {value!r}")
    return number


def seconds(value: Any, source: str, key: str) -> float:
    """A duration: a positive number of seconds."""
    number = _number(value, source, key)
    if number <= 0:
        raise ConfigError(source, key, f"must be a positive number of seconds, not {value!r}")
    return number


def _number(value: Any, source: str, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(source, key, f"must be a number, not {value!r}")
    return float(value)


def keys(value: Any, source: str, key: str) -> tuple[str, ...]:
    """A key list (``api_keys``, ``admin_keys``): plain keys or ``sha256:<hex>``."""
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str | None) for v in value):
        raise ConfigError(source, key, "must be a list of strings")
    out = []
    for v in value:
        if not v:
            continue  # an unset ${ENV_VAR}: no key, rather than an empty key that matches ""
        if v.startswith("sha256:") and not re.fullmatch(r"sha256:[0-9a-fA-F]{64}", v):
            raise ConfigError(source, key, "a sha256: key needs 64 hex digits")
        out.append(v)
    return tuple(out)
