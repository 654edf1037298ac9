"""The value types of the config: bounds, URLs, key lists, proxy addresses, defaults from the environment.

Each is a type the schema annotates a field with; a check that fails raises
``ValueError`` with the sentence the user reads after the key's name.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, BeforeValidator, Field, ValidationInfo
from pydantic.fields import FieldInfo

from .interpolation import expand
from .outbound import parse_proxy

Positive = Annotated[int, Field(gt=0)]
PositiveNumber = Annotated[float, Field(gt=0)]
NonNegativeNumber = Annotated[float, Field(ge=0)]
Fraction = Annotated[float, Field(ge=0, le=1)]


def http_url(text: str) -> str:
    """An ``http(s)://host[:port][/path][?query]`` URL, as an upstream's ``base_url`` must be."""
    try:
        parts = urlsplit(text)
        _ = parts.port  # raises on a port that is not a number
    except ValueError as exc:
        raise ValueError(f"not a valid URL: {text!r} ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"must be an http:// or https:// URL with a host, not {text!r}")
    if parts.fragment or any(c.isspace() for c in text):
        raise ValueError(f"not a valid URL: {text!r}")
    return text


def storage_url(url: str) -> str:
    """``sqlite:///PATH`` (one process) or ``postgresql://...`` (replicas on one database)."""
    if url.startswith("sqlite://"):
        return url
    if not url.startswith(("postgresql://", "postgres://")):
        raise ValueError("must be sqlite:///PATH or postgresql://USER:PASSWORD@HOST:PORT/DATABASE")
    try:
        urlsplit(url).port  # noqa: B018 - parsing the port is the check
    except ValueError as exc:
        raise ValueError(f"is not a valid PostgreSQL URL: {exc}") from None
    return url


def proxy_address(text: str) -> str:
    parse_proxy(text)  # its ValueError says what is wrong
    return text


def _listed(value: Any, what: str, *, nulls: bool = False) -> list[Any]:
    """A list of strings (``nulls``: or nulls, an unset ``${VAR}``) as given; one alone is a list, none empty."""
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) or (nulls and v is None) for v in value):
        raise ValueError(f"must be a list of {what}")
    return list(value)


def key_list(value: Any) -> tuple[str, ...]:
    """A key list (``api_keys``, ``admin_keys``): plain keys or ``sha256:<hex>``; one key alone is a list."""
    # An unset ${ENV_VAR} is no key, not a key that matches "".
    keys = tuple(v for v in _listed(value, "strings", nulls=True) if v)
    if any(k.startswith("sha256:") and not re.fullmatch(r"sha256:[0-9a-fA-F]{64}", k) for k in keys):
        raise ValueError("a sha256: key needs 64 hex digits")
    return keys


def origin_list(value: Any) -> tuple[str, ...]:
    """``server.cors_origins``: ``*`` or origins as a browser sends them (``https://app.example.com``, a port
    maybe; no path, no trailing slash: such a value would never match); one alone is a list."""
    origins = _listed(value, "origins")
    for origin in origins:
        if origin != "*" and not re.fullmatch(r"https?://[^/\s:]+(?::\d{1,5})?", origin):
            raise ValueError(f"{origin!r} is no origin: write '*' or scheme://host[:port], without a path or '/'")
    return tuple(origins)


def from_environment(value: Any, info: ValidationInfo) -> Any:
    """A default written ``${VAR}``, expanded from the environment being loaded (none: unset).

    A file's values are expanded when it is read; this reaches the defaults
    declared in the schema, so ``upstream.api_key`` defaults to
    ``$OPENAI_API_KEY`` with or without a file.
    """
    if not isinstance(value, str) or "${" not in value:
        return value
    env: Mapping[str, str] = (info.context or {}).get("env", {})
    return expand(value, env)


HttpUrl = Annotated[str, AfterValidator(http_url)]
StorageUrl = Annotated[str, AfterValidator(storage_url)]
ProxyAddress = Annotated[str, AfterValidator(proxy_address)]
Keys = Annotated[tuple[str, ...], BeforeValidator(key_list)]
Origins = Annotated[tuple[str, ...], BeforeValidator(origin_list)]
Secret = Annotated[str | None, BeforeValidator(from_environment)]


@dataclass(frozen=True)
class Allowed:
    """What a field takes, read from its annotation: the base type, null or not, its rules and choices."""

    base: Any
    nullable: bool
    rules: tuple[Any, ...]  # bounds (``annotated_types.Gt``...) and validators, outermost first

    @property
    def choices(self) -> tuple[Any, ...]:
        return typing.get_args(self.base) if typing.get_origin(self.base) is Literal else ()

    def bound(self, *names: str) -> tuple[str, Any] | None:
        """The first of the rules named (``"gt", "ge"`` or ``"lt", "le"``) as (name, value)."""
        for rule in self.rules:
            for name in names:
                if getattr(rule, name, None) is not None:
                    return name, getattr(rule, name)
        return None

    def validated_by(self) -> tuple[Any, ...]:
        return tuple(rule.func for rule in self.rules if isinstance(rule, AfterValidator | BeforeValidator))


def allowed(field: FieldInfo) -> Allowed:
    kind, nullable, rules = field.annotation, False, list(field.metadata)
    while True:
        if typing.get_origin(kind) in (typing.Union, types.UnionType) and type(None) in typing.get_args(kind):
            nullable = True
            (kind,) = [a for a in typing.get_args(kind) if a is not type(None)]
        elif typing.get_origin(kind) is Annotated:
            kind, *extra = typing.get_args(kind)
            rules += [m for e in extra for m in (e.metadata if isinstance(e, FieldInfo) else [e])]
        else:
            return Allowed(kind, nullable, tuple(rules))
