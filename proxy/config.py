"""Configuration: ``proxy.yaml`` (+ ``tenants_dir``), validated once at start.

This is the only module that reads the environment. Everything it returns is
frozen; handlers receive it through the app factory. A bad file raises
:class:`ConfigError` naming the file, the key and what is wrong; the CLI turns
that into exit status 2 before anything starts.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml

from .errors import ConfigError

DEFAULTS: dict[str, Any] = {
    "upstream": {
        "base_url": "https://api.openai.com/v1",
        "api_key": "${OPENAI_API_KEY}",
        "organization": None,
        "project": None,
        "connect_timeout_s": 10.0,
        "read_timeout_s": 600.0,
    },
    "context": {
        "enabled": True,
        "recent_window_tokens": 4000,
        "summary_budget_tokens": 2500,
        "compression_mode": "background",
    },
    "compression": {
        "model": "gpt-4o-mini",
        "base_url": None,
        "api_key": None,
        "temperature": 0.0,
        "timeout_s": 20.0,
    },
    "memory": {
        "enabled": True,
        "scope": "user",
        "top_k": 8,  # the spec says 5; the eval chose 8 (docs/retrieval.md)
        "budget_tokens": 800,
        "vector_weight": 0.6,
        "bm25_weight": 0.4,
        "position": "last_user",
        "extract_every_messages": 6,
        "dedup_cosine": 0.92,
        "stale_days": 180,
        "pii": "mask",
        "recency_half_life_days": None,
        "importance_weight": 0.0,
    },
}

TOP_DEFAULTS: dict[str, Any] = {
    "server": {"host": "127.0.0.1", "port": 8787, "max_body_bytes": 16 * 1024 * 1024},
    "storage": {"url": "sqlite:///paperclip.db"},
    "embedding": {"model": "bundled", "backend": "auto", "cache_dir": None},
    "tenants_dir": None,
    "passthrough_keys": False,
}

_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


@dataclass(frozen=True)
class Upstream:
    base_url: str
    api_key: str | None
    organization: str | None
    project: str | None
    connect_timeout_s: float
    read_timeout_s: float


@dataclass(frozen=True)
class Context:
    enabled: bool
    recent_window_tokens: int
    summary_budget_tokens: int
    compression_mode: Literal["background", "inline"]


@dataclass(frozen=True)
class Compression:
    model: str
    base_url: str | None
    api_key: str | None
    temperature: float
    timeout_s: float


@dataclass(frozen=True)
class Memory:
    enabled: bool
    scope: Literal["user", "session"]
    top_k: int
    budget_tokens: int
    vector_weight: float
    bm25_weight: float
    position: Literal["last_user", "system_tail", "system_head"]
    extract_every_messages: int
    dedup_cosine: float
    stale_days: int
    pii: Literal["mask", "keep", "drop"]
    recency_half_life_days: float | None
    importance_weight: float


@dataclass(frozen=True)
class TenantSettings:
    """Everything a request of one tenant is served with (``defaults`` + overrides)."""

    name: str
    api_keys: tuple[str, ...]
    admin_keys: tuple[str, ...]
    upstream: Upstream
    context: Context
    compression: Compression
    memory: Memory


@dataclass(frozen=True)
class Server:
    host: str
    port: int
    max_body_bytes: int


@dataclass(frozen=True)
class Settings:
    server: Server
    storage_url: str
    embedding_model: str
    embedding_backend: Literal["auto", "onnx", "torch"]
    embedding_cache_dir: Path | None  # null in the file: the user's cache folder (None without one)
    passthrough_keys: bool
    defaults: TenantSettings
    tenants: tuple[TenantSettings, ...] = field(default_factory=tuple)
    source: str = "<defaults>"

    @property
    def sqlite_path(self) -> str:
        url = self.storage_url
        if not url.startswith("sqlite://"):
            raise ConfigError(self.source, "storage.url", "only sqlite:/// URLs are supported")
        path = url.removeprefix("sqlite://").removeprefix("/")
        return path or ":memory:"


def load(path: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """Read and validate a config file; ``None`` gives the built-in defaults."""
    environ = os.environ if env is None else env
    if path is None:
        return build({}, "<defaults>", environ)
    source = str(path)
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError(source, "-", f"cannot read the file: {exc.strerror}") from exc
    raw = _parse_yaml(text, source)
    return build(raw, source, environ, base_dir=Path(path).parent)


def from_dict(raw: Mapping[str, Any], env: Mapping[str, str] | None = None) -> Settings:
    return build(raw, "<dict>", os.environ if env is None else env)


def _parse_yaml(text: str, source: str) -> dict[str, Any]:
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(source, "-", f"not valid YAML: {exc}") from exc
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(source, "-", "the top level must be a mapping")
    return raw


def build(
    raw: Mapping[str, Any],
    source: str,
    env: Mapping[str, str],
    base_dir: Path | None = None,
) -> Settings:
    raw = _interpolate(raw, env, source, "")
    _check_keys(raw, {**TOP_DEFAULTS, "defaults": None, "tenants": None}, source, "")
    top = _merge(TOP_DEFAULTS, {k: v for k, v in raw.items() if k in TOP_DEFAULTS}, source, "")
    defaults_raw = _interpolate(_merge(DEFAULTS, raw.get("defaults") or {}, source, "defaults"), env, source, "")
    defaults = _tenant("defaults", defaults_raw, {}, source)
    if not isinstance(raw.get("tenants") or {}, dict):
        raise ConfigError(source, "tenants", "must be a mapping of tenant name to settings")
    tenants_raw = dict(raw.get("tenants") or {})
    if top["tenants_dir"]:
        tenants_raw.update(_tenants_dir(top["tenants_dir"], base_dir, env, source))
    tenants = tuple(
        _tenant(name, defaults_raw, body or {}, origin)
        for name, (body, origin) in _with_origin(tenants_raw, source).items()
    )
    settings = Settings(
        server=Server(
            host=_typed(top["server"]["host"], str, source, "server.host"),
            port=_typed(top["server"]["port"], int, source, "server.port"),
            max_body_bytes=_positive(top["server"]["max_body_bytes"], source, "server.max_body_bytes"),
        ),
        storage_url=_typed(top["storage"]["url"], str, source, "storage.url"),
        embedding_model=_typed(top["embedding"]["model"], str, source, "embedding.model"),
        embedding_backend=_choice(top["embedding"]["backend"], _BACKENDS, source, "embedding.backend"),
        embedding_cache_dir=_cache_dir(top["embedding"]["cache_dir"], env, source),
        passthrough_keys=_typed(top["passthrough_keys"], bool, source, "passthrough_keys"),
        defaults=defaults,
        tenants=tenants,
        source=source,
    )
    _ = settings.sqlite_path  # validates storage.url
    _unique_keys(settings)
    return settings


_BACKENDS = ("auto", "onnx", "torch")


def _choice(value: Any, choices: tuple[str, ...], source: str, key: str) -> Any:
    if value not in choices:
        raise ConfigError(source, key, f"must be one of {', '.join(choices)}, not {value!r}")
    return value


def _cache_dir(value: Any, env: Mapping[str, str], source: str) -> Path | None:
    """``embedding.cache_dir``, or $XDG_CACHE_HOME/paperclip, or ~/.cache/paperclip."""
    if value is not None:
        return Path(_typed(value, str, source, "embedding.cache_dir")).expanduser()
    if env.get("XDG_CACHE_HOME"):
        return Path(env["XDG_CACHE_HOME"]) / "paperclip"
    if env.get("HOME"):
        return Path(env["HOME"]) / ".cache" / "paperclip"
    return None


def _with_origin(tenants: Mapping[str, Any], source: str) -> dict[str, tuple[Any, str]]:
    out: dict[str, tuple[Any, str]] = {}
    for name, body in tenants.items():
        if isinstance(body, tuple):
            out[name] = body
        else:
            out[name] = (body, source)
    return out


def _tenants_dir(
    folder: str, base_dir: Path | None, env: Mapping[str, str], source: str
) -> dict[str, tuple[Any, str]]:
    path = Path(folder)
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    if not path.is_dir():
        raise ConfigError(source, "tenants_dir", f"{path} is not a folder")
    out: dict[str, tuple[Any, str]] = {}
    for file in sorted([*path.glob("*.yaml"), *path.glob("*.yml")]):
        body = _interpolate(_parse_yaml(file.read_text(), str(file)), env, str(file), "")
        out[file.stem] = (body, str(file))
    return out


def _tenant(name: str, defaults: Mapping[str, Any], body: Any, source: str) -> TenantSettings:
    where = "defaults" if name == "defaults" else f"tenants.{name}"
    if not isinstance(body, Mapping):
        raise ConfigError(source, where, "must be a mapping")
    own = {k: v for k, v in body.items() if k not in ("api_keys", "admin_keys")}
    merged = _merge(defaults, own, source, where)
    up, ctx, comp, mem = (merged[k] for k in ("upstream", "context", "compression", "memory"))
    return TenantSettings(
        name=name,
        api_keys=_keys(body.get("api_keys"), source, f"{where}.api_keys"),
        admin_keys=_keys(body.get("admin_keys"), source, f"{where}.admin_keys"),
        upstream=_section(Upstream, up, source, f"{where}.upstream"),
        context=_section(Context, ctx, source, f"{where}.context"),
        compression=_section(Compression, comp, source, f"{where}.compression"),
        memory=_section(Memory, mem, source, f"{where}.memory"),
    )


_CHOICES: dict[str, tuple[str, ...]] = {
    "compression_mode": ("background", "inline"),
    "scope": ("user", "session"),
    "position": ("last_user", "system_tail", "system_head"),
    "pii": ("mask", "keep", "drop"),
}
_FRACTIONS = {"vector_weight", "bm25_weight", "dedup_cosine", "importance_weight"}
_NONNEG = {"temperature"}

T = TypeVar("T")


def _section(cls: type[T], values: Mapping[str, Any], source: str, where: str) -> T:
    kwargs: dict[str, Any] = {}
    for f in fields(cls):  # type: ignore[arg-type]
        key = f"{where}.{f.name}"
        value = values[f.name]
        kwargs[f.name] = _field(f.name, f.type, value, source, key)
    return cls(**kwargs)


def _field(name: str, kind: Any, value: Any, source: str, key: str) -> Any:
    text = str(kind)
    optional = "None" in text
    if value is None or value == "":
        if optional:
            return None
        raise ConfigError(source, key, "must be set")
    if name in _CHOICES:
        return _choice(value, _CHOICES[name], source, key)
    if text.startswith("bool"):
        return _typed(value, bool, source, key)
    if text.startswith("int"):
        return _positive(value, source, key)
    if text.startswith("float"):
        number = _number(value, source, key)
        if name in _FRACTIONS and not 0 <= number <= 1:
            raise ConfigError(source, key, f"must be between 0 and 1, not {value!r}")
        if name not in _NONNEG and name not in _FRACTIONS and number <= 0:
            raise ConfigError(source, key, f"must be positive, not {value!r}")
        if number < 0:
            raise ConfigError(source, key, f"must not be negative, not {value!r}")
        return number
    return _typed(value, str, source, key)


def _typed(value: Any, kind: type[T], source: str, key: str) -> T:
    if kind is int and isinstance(value, bool):
        raise ConfigError(source, key, f"must be an integer, not {value!r}")
    if not isinstance(value, kind):
        raise ConfigError(source, key, f"must be {kind.__name__}, not {value!r}")
    return value


def _positive(value: Any, source: str, key: str) -> int:
    number = _typed(value, int, source, key)
    if number <= 0:
        raise ConfigError(source, key, f"must be a positive integer, not {value!r}")
    return number


def _number(value: Any, source: str, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(source, key, f"must be a number, not {value!r}")
    return float(value)


def _keys(value: Any, source: str, key: str) -> tuple[str, ...]:
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


def _merge(base: Mapping[str, Any], over: Any, source: str, where: str) -> dict[str, Any]:
    if not isinstance(over, Mapping):
        raise ConfigError(source, where or "-", "must be a mapping")
    _check_keys(over, base, source, where)
    out = copy.deepcopy(dict(base))
    for key, value in over.items():
        if isinstance(base.get(key), Mapping):
            out[key] = _merge(base[key], value if value is not None else {}, source, _join(where, key))
        else:
            out[key] = value
    return out


def _check_keys(over: Mapping[str, Any], base: Mapping[str, Any], source: str, where: str) -> None:
    for key in over:
        if key not in base:
            known = ", ".join(sorted(base))
            raise ConfigError(source, _join(where, str(key)), f"unknown key (known here: {known})")


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _interpolate(value: Any, env: Mapping[str, str], source: str, where: str) -> Any:
    if isinstance(value, str):
        return _expand(value, env)
    if isinstance(value, Mapping):
        return {k: _interpolate(v, env, source, _join(where, str(k))) for k, v in value.items()}
    if isinstance(value, list):
        return [_interpolate(v, env, source, where) for v in value]
    return value


def _expand(text: str, env: Mapping[str, str]) -> str | None:
    whole = _ENV.fullmatch(text)
    if whole:  # a value that is only ${VAR}: unset means "not configured" (None)
        found = env.get(whole.group(1), whole.group(2))
        return found if found else None
    return _ENV.sub(lambda m: env.get(m.group(1), m.group(2) or ""), text)


def _unique_keys(settings: Settings) -> None:
    seen: dict[str, str] = {}
    for tenant in settings.tenants:
        for key in tenant.api_keys + tenant.admin_keys:
            if key in seen and seen[key] != tenant.name:
                raise ConfigError(
                    settings.source, f"tenants.{tenant.name}", f"a key is also used by tenant {seen[key]}"
                )
            seen[key] = tenant.name
