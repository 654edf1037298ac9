"""Loading the config: which file, the YAML, ``${ENV}``, ``defaults`` merged into each tenant, every problem.

A file is read whole and every problem in it is reported at once, each with
its file, dotted key and what is wrong: the top level, ``defaults``, each
tenant (of ``tenants`` or of a ``tenants_dir`` file, named by that file).
A tenant's problem that it only inherits is reported once, under ``defaults``.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Set
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from ..errors import ConfigError, ConfigProblem
from .environment import proxy_rules
from .interpolation import interpolate
from .outbound import DIRECT
from .problems import problems
from .schema import Defaults, Settings, Tenant, TenantSettings, TopLevel, Upstream
from .upstream_files import anchor_files, file_problems
from .values import key_list

# The packaged copy of the repo's proxy.yaml: what `paperclip serve` runs on when no file is named or found.
EMBEDDED_FILE = Path(__file__).with_name("proxy.yaml")
CONFIG_ENV = "PAPERCLIP_CONFIG"
NO_FILE = "<defaults>"

M = TypeVar("M", bound=BaseModel)


def find_file(explicit: str | None, env: Mapping[str, str] | None = None, cwd: Path | None = None) -> Path:
    """``--config``, else ``$PAPERCLIP_CONFIG``, else ``./proxy.yaml``, else the embedded one."""
    environ = os.environ if env is None else env
    if explicit:
        return Path(explicit)
    if environ.get(CONFIG_ENV):
        return Path(environ[CONFIG_ENV])
    here = Path("proxy.yaml") if cwd is None else cwd / "proxy.yaml"
    return here if here.exists() else EMBEDDED_FILE


def load(path: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """Read and validate a config file; ``None`` gives the schema's defaults."""
    environ = os.environ if env is None else env
    if path is None:
        return build({}, NO_FILE, environ)
    source = str(path)
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError(source, "-", f"cannot read the file: {exc.strerror}") from exc
    return build(_parse_yaml(text, source), source, environ, base_dir=Path(path).parent)


def from_dict(raw: Mapping[str, Any], env: Mapping[str, str] | None = None) -> Settings:
    return build(raw, "<dict>", os.environ if env is None else env)


def build(raw: Mapping[str, Any], source: str, env: Mapping[str, str], base_dir: Path | None = None) -> Settings:
    return _Build(env).settings(interpolate(raw, env), source, base_dir)


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


class _Build:
    """One load: the problems found so far, and what validation reads of the environment."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.found: list[ConfigProblem] = []
        try:
            routes = proxy_rules(env)
        except ConfigError as exc:
            self.found += exc.problems
            routes = DIRECT
        self.context: dict[str, Any] = {"env": env, "routes": routes}

    def settings(self, raw: Mapping[str, Any], source: str, base_dir: Path | None) -> Settings:
        top = self.validate(TopLevel, {k: v for k, v in raw.items() if k not in ("defaults", "tenants")}, source, "")
        given = anchor_files(raw.get("defaults") or {}, base_dir)
        if not isinstance(given, Mapping):
            self.add(source, "defaults", "must be a mapping")
            given = {}
        before = len(self.found)
        defaults = self.tenant("defaults", Defaults, given, source)
        inherited = {p.key.removeprefix("defaults.") for p in self.found[before:]}
        tenants: list[TenantSettings] = []
        holders: list[tuple[str, tuple[str, ...], tuple[str, ...], str]] = []
        for name, body, origin in self.tenant_bodies(raw, source, base_dir):
            merged = _merge(given, body)
            tenant = self.tenant(name, Tenant, merged, origin, inherited)
            if tenant is not None:
                tenants.append(tenant)
                holders.append((name, tenant.api_keys, tenant.admin_keys, origin))
            else:  # its other problems are reported; its keys are checked all the same
                holders.append((name, _keys(merged, "api_keys"), _keys(merged, "admin_keys"), origin))
        server = raw.get("server")
        self.unique_keys(holders, _keys(server, "admin_keys"), _keys(server, "metrics_keys"), source)
        if self.found or top is None or defaults is None:
            raise ConfigError.of(self.found)
        return Settings(**dict(top), defaults=defaults, tenants=tuple(tenants), source=source)

    def validate(self, model: type[M], raw: Any, source: str, where: str, skip: Set[str] = frozenset()) -> M | None:
        try:
            return model.model_validate(raw, context=self.context)
        except ValidationError as error:
            for key, problem in problems(error, model):
                if key not in skip:
                    self.add(source, _join(where, key), problem)
            return None

    def tenant(
        self, name: str, model: type[Defaults], merged: Any, source: str, inherited: Set[str] = frozenset()
    ) -> TenantSettings | None:
        where = "defaults" if model is Defaults else f"tenants.{name}"
        if not isinstance(merged, Mapping):
            self.add(source, where, "must be a mapping")
            return None
        checked = self.validate(model, merged, source, where, inherited)
        # The files are checked once the upstream section is valid, whatever the others are.
        upstream = checked.upstream if checked is not None else self.quietly(Upstream, merged.get("upstream") or {})
        for key, problem in file_problems(upstream) if upstream is not None else ():
            if f"upstream.{key}" not in inherited:
                self.add(source, f"{where}.upstream.{key}", problem)
        return None if checked is None else TenantSettings(name=name, **dict(checked))

    def quietly(self, model: type[M], raw: Any) -> M | None:
        """``raw`` as ``model``, or None: its problems are reported by the validation that includes it."""
        try:
            return model.model_validate(raw, context=self.context)
        except ValidationError:
            return None

    def tenant_bodies(self, raw: Mapping[str, Any], source: str, base_dir: Path | None) -> list[tuple[str, Any, str]]:
        """Each tenant's name, own body and the file it is in: ``tenants``, then the ``tenants_dir`` files.

        A tenant is defined in one place: a name met again (in ``tenants`` and a
        file, or in two files) is a problem of the later one, naming the first.
        """
        listed = raw.get("tenants") or {}
        if not isinstance(listed, Mapping):
            self.add(source, "tenants", "must be a mapping of tenant name to settings")
            listed = {}
        bodies = [(str(name), anchor_files(body or {}, base_dir), source) for name, body in listed.items()]
        places = {name: f"under tenants in {source}" for name, _, _ in bodies}
        folder = raw.get("tenants_dir")
        for name, body, origin in self.tenants_dir(folder, source, base_dir) if isinstance(folder, str) and folder else ():
            if name in places:
                self.add(origin, f"tenants.{name}", f"is also defined {places[name]} (a tenant is defined in one place)")
            places.setdefault(name, f"in {origin}")
            bodies.append((name, body, origin))
        return bodies

    def tenants_dir(self, folder: str, source: str, base_dir: Path | None) -> list[tuple[str, Any, str]]:
        path = Path(folder)
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        if not path.is_dir():
            self.add(source, "tenants_dir", f"{path} is not a folder")
            return []
        out: list[tuple[str, Any, str]] = []
        for file in sorted([*path.glob("*.yaml"), *path.glob("*.yml")]):
            try:
                body = interpolate(_parse_yaml(file.read_text(), str(file)), self.context["env"])
            except ConfigError as exc:
                self.found += exc.problems
                continue
            out.append((file.stem, anchor_files(body, file.parent), str(file)))
        return out

    def unique_keys(
        self,
        holders: list[tuple[str, tuple[str, ...], tuple[str, ...], str]],
        operator: tuple[str, ...],
        metrics: tuple[str, ...],
        source: str,
    ) -> None:
        """One key, one role: a tenant's client or admin key is no other tenant's, no operator or metrics
        key, and not both of its own; a plain key and its ``sha256:`` form are the same key.

        A key with two roles is served as the first that matches (a client key that is also an operator
        key chats, and reads every tenant's data), never as the reference says each role is.
        """
        roles = {_canonical(k): "a metrics key" for k in metrics} | {_canonical(k): "an operator key" for k in operator}
        seen: dict[str, str] = {}
        for name, api_keys, admin_keys, origin in holders:  # a tenant's problem names the file it is in
            clients, admins = {_canonical(k) for k in api_keys}, {_canonical(k) for k in admin_keys}
            if clients & admins:
                self.add(origin, f"tenants.{name}", "a key is both a client key and an admin key of it")
            for key in sorted(clients | admins):
                if key in roles:
                    self.add(origin, f"tenants.{name}", f"a key is also {roles[key]}")
                if seen.get(key, name) != name:
                    self.add(origin, f"tenants.{name}", f"a key is also used by tenant {seen[key]}")
                seen[key] = name

    def add(self, source: str, key: str, problem: str) -> None:
        self.found.append(ConfigProblem(source, key, problem))


def _keys(section: Any, name: str) -> tuple[str, ...]:
    """A key list of a section that may not have validated: its keys, or none when they are invalid too."""
    try:
        return key_list(section.get(name)) if isinstance(section, Mapping) else ()
    except ValueError:
        return ()


def _canonical(key: str) -> str:
    """A configured key as the hex digest it is compared by (plain, or ``sha256:<hex>`` in any case)."""
    if key.startswith("sha256:"):
        return key.removeprefix("sha256:").lower()
    return hashlib.sha256(key.encode()).hexdigest()


def _merge(base: Mapping[str, Any], over: Any) -> Any:
    """``over`` on top of ``base``, mapping by mapping; a section set to null keeps ``base``'s."""
    if not isinstance(over, Mapping):
        return over
    out = dict(base)
    for key, value in over.items():
        if isinstance(base.get(key), Mapping) and (value is None or isinstance(value, Mapping)):
            out[key] = _merge(base[key], value or {})
        else:
            out[key] = value
    return out


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where and key else where or key

