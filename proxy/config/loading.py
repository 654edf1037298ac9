"""Loading the config: the YAML file(s), ``${ENV}`` interpolation, ``defaults`` merged into tenants."""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from ..errors import ConfigError
from .environment import proxy_rules
from .fields import CHOICES, choice, keys, positive, seconds, section, typed
from .outbound import ProxyRules
from .schema import (
    DEFAULTS,
    TENANT_KEYS,
    TOP_DEFAULTS,
    Compression,
    Context,
    Memory,
    Server,
    Settings,
    TenantSettings,
)
from .upstream_settings import anchor_files, upstream

_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


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
    routes = proxy_rules(env)
    given = anchor_files(raw.get("defaults"), base_dir)
    defaults_raw = _interpolate(_merge(DEFAULTS, given or {}, source, "defaults"), env, source, "")
    defaults = _tenant("defaults", defaults_raw, {}, source, routes)
    if not isinstance(raw.get("tenants") or {}, dict):
        raise ConfigError(source, "tenants", "must be a mapping of tenant name to settings")
    tenants_raw = {name: (anchor_files(body, base_dir), source) for name, body in (raw.get("tenants") or {}).items()}
    if top["tenants_dir"]:
        tenants_raw.update(_tenants_dir(top["tenants_dir"], base_dir, env, source))
    tenants = tuple(
        _tenant(name, defaults_raw, body or {}, origin, routes) for name, (body, origin) in tenants_raw.items()
    )
    settings = Settings(
        server=_server(top["server"], source),
        storage_url=_storage_url(typed(top["storage"]["url"], str, source, "storage.url"), source),
        embedding_model=typed(top["embedding"]["model"], str, source, "embedding.model"),
        embedding_backend=choice(top["embedding"]["backend"], CHOICES["backend"], source, "embedding.backend"),
        embedding_cache_dir=_cache_dir(top["embedding"]["cache_dir"], env, source),
        passthrough_keys=typed(top["passthrough_keys"], bool, source, "passthrough_keys"),
        defaults=defaults,
        tenants=tenants,
        source=source,
    )
    _unique_keys(settings)
    return settings


def _cache_dir(value: Any, env: Mapping[str, str], source: str) -> Path | None:
    """``embedding.cache_dir``, or $XDG_CACHE_HOME/paperclip, or ~/.cache/paperclip."""
    if value is not None:
        return Path(typed(value, str, source, "embedding.cache_dir")).expanduser()
    if env.get("XDG_CACHE_HOME"):
        return Path(env["XDG_CACHE_HOME"]) / "paperclip"
    if env.get("HOME"):
        return Path(env["HOME"]) / ".cache" / "paperclip"
    return None


def _server(values: Mapping[str, Any], source: str) -> Server:
    return Server(
        host=typed(values["host"], str, source, "server.host"),
        port=typed(values["port"], int, source, "server.port"),
        max_body_bytes=positive(values["max_body_bytes"], source, "server.max_body_bytes"),
        admin_keys=keys(values["admin_keys"], source, "server.admin_keys"),
        log_format=choice(values["log_format"], CHOICES["log_format"], source, "server.log_format"),
        log_content=typed(values["log_content"], bool, source, "server.log_content"),
        header_timeout_s=seconds(values["header_timeout_s"], source, "server.header_timeout_s"),
        max_record_bytes=positive(values["max_record_bytes"], source, "server.max_record_bytes"),
        metrics_keys=keys(values["metrics_keys"], source, "server.metrics_keys"),
    )


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
        out[file.stem] = (anchor_files(body, file.parent), str(file))
    return out


def _tenant(name: str, defaults: Mapping[str, Any], body: Any, source: str, routes: ProxyRules) -> TenantSettings:
    where = "defaults" if name == "defaults" else f"tenants.{name}"
    if not isinstance(body, Mapping):
        raise ConfigError(source, where, "must be a mapping")
    own = {k: v for k, v in body.items() if k not in TENANT_KEYS}
    _check_keys(body, {**defaults, **dict.fromkeys(TENANT_KEYS)}, source, where)
    merged = _merge(defaults, own, source, where)
    up, ctx, comp, mem = (merged[k] for k in ("upstream", "context", "compression", "memory"))
    return TenantSettings(
        name=name,
        api_keys=keys(body.get("api_keys"), source, f"{where}.api_keys"),
        admin_keys=keys(body.get("admin_keys"), source, f"{where}.admin_keys"),
        upstream=upstream(up, source, f"{where}.upstream", routes),
        context=section(Context, ctx, source, f"{where}.context"),
        compression=section(Compression, comp, source, f"{where}.compression"),
        memory=section(Memory, mem, source, f"{where}.memory"),
    )


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


def _storage_url(url: str, source: str) -> str:
    """``sqlite:///PATH`` (one process) or ``postgresql://...`` (replicas on one database)."""
    if url.startswith("sqlite://"):
        return url
    if not url.startswith(("postgresql://", "postgres://")):
        raise ConfigError(
            source, "storage.url", "must be sqlite:///PATH or postgresql://USER:PASSWORD@HOST:PORT/DATABASE"
        )
    try:
        urlsplit(url).port  # noqa: B018 - parsing the port is the check
    except ValueError as exc:
        raise ConfigError(source, "storage.url", f"is not a valid PostgreSQL URL: {exc}") from None
    return url
