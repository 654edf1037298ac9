"""Who is asking: the tenant (by client key), the user and the session.

Tenant ids scope every stored row. A passthrough key (``passthrough_keys:
true``) is served with the ``defaults`` settings but gets a tenant id of its
own derived from a hash of the key, so two clients with different keys never
share memories. That derivation is part of every stored key of such clients:
changing it orphans their data.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .config import Settings, TenantSettings
from .errors import BadRequest, Forbidden, NotFound, Unauthorized
from .hashing import canonical
from .message_text import only_client_context

CONTROL_PREFIX = "x-paperclip-"
# Cookies whose names start with this are Paperclip's own (the inspector's session among them):
# never forwarded upstream, never set by an upstream (upstream.headers).
COOKIE_PREFIX = "paperclip"
ANONYMOUS = "anonymous"
PASSTHROUGH_SCOPE = re.compile(r"key-[0-9a-f]{24}")


@dataclass(frozen=True)
class Tenant:
    """A resolved tenant: its settings, its data scope and the key to send upstream."""

    id: str
    settings: TenantSettings
    upstream_key: str | None
    passthrough: bool

    @property
    def anthropic_key(self) -> str | None:
        """The key for Anthropic's API: the tenant's ``anthropic.api_key``, or a passthrough client's own."""
        return self.upstream_key if self.passthrough else self.settings.anthropic.api_key

    @property
    def compression_key(self) -> str | None:
        """The key the compression model is called with when ``compression.api_key`` is not set:
        the key of the upstream its ``compression.api`` speaks to."""
        return self.anthropic_key if self.settings.compression.api == "messages" else self.upstream_key


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


def _stored_digest(stored: str) -> bytes:
    """The digest a configured key (plain or ``sha256:<hex>``) is compared with."""
    if stored.startswith("sha256:"):
        return bytes.fromhex(stored.removeprefix("sha256:"))
    return _digest(stored)


class KeyRing:
    """Maps client keys (and admin keys) to tenants."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        # Digests of the configured keys, computed once (not per request and key).
        self._api = [(_stored_digest(k), t) for t in settings.tenants for k in t.api_keys]
        self._admin = [(_stored_digest(k), t) for t in settings.tenants for k in t.admin_keys]
        self._operator = [_stored_digest(k) for k in settings.server.admin_keys]
        self._metrics = [_stored_digest(k) for k in settings.server.metrics_keys]
        self._named = {t.name: t for t in settings.tenants}
        self._near = NearMisses(
            [*settings.server.admin_keys, *settings.server.metrics_keys,
             *(k for t in settings.tenants for k in t.api_keys + t.admin_keys)]
        )

    def _find(self, key: str, admin: bool) -> TenantSettings | None:
        presented = _digest(key)
        found = None
        for want, tenant in self._admin if admin else self._api:
            # No early exit: every key is compared, so timing says nothing of which matched.
            if hmac.compare_digest(presented, want):
                found = tenant
        return found

    def tenant_for(self, key: str | None) -> Tenant:
        if key:
            tenant = self._find(key, admin=False)
            if tenant is not None:
                return Tenant(tenant.name, tenant, tenant.upstream.api_key, passthrough=False)
            if self.settings.passthrough_keys and not self._known_to_us(key):
                return Tenant(passthrough_scope(key), self.settings.defaults, key, passthrough=True)
        raise Unauthorized(
            "Incorrect API key provided to the Paperclip proxy."
            if key
            else "Missing API key: send it as 'Authorization: Bearer <key>' (or in 'x-api-key' or 'api-key')."
        )

    def is_operator(self, key: str) -> bool:
        presented = _digest(key)
        return any([hmac.compare_digest(presented, want) for want in self._operator])

    def may_read_metrics(self, key: str | None) -> bool:
        """``/metrics``: open when no ``server.metrics_keys`` are set, else a metrics or operator key."""
        if not self._metrics:
            return True
        if not key:
            return False
        presented = _digest(key)
        return any([hmac.compare_digest(presented, want) for want in self._metrics]) or self.is_operator(key)

    def _known_to_us(self, key: str) -> bool:
        """A key of this proxy (operator, admin, metrics), or nearly one (a typo): never forwarded upstream.

        ``sha256:`` keys are recognised exactly, as sent or bare (``bare_key``); plain keys by ``NearMisses``.
        """
        return any(self.is_operator(form) or self._find(form, admin=True) is not None
                   or any([hmac.compare_digest(_digest(form), want) for want in self._metrics])
                   for form in _forms(key)) or self._near(key)

    def is_ours(self, value: str) -> bool:
        """Any key of this proxy (a client key too), or nearly one: never sent upstream in any header."""
        return bool(value) and (any(self._find(form, admin=False) is not None for form in _forms(value))
                                or self._known_to_us(value))

    def admin_grant(self, key: str | None, named: str | None, method: str) -> Grant:
        """Who may call the admin API, on which tenant's data (SPEC §6).

        An operator key names any tenant with ``named`` (``?tenant=``), a
        passthrough scope (``key-...``) included; a tenant's admin key sees its
        tenant only; in passthrough mode a client key may read and delete its
        own scope's data, nothing else.
        """
        if not key:
            raise Unauthorized("Missing admin key: send it as 'Authorization: Bearer <key>'.")
        if self.is_operator(key):
            return Grant(self._operator_tenant(named), operator=True, by="operator")
        found = self._find(key, admin=True)
        if found is not None:
            if named not in (None, found.name):
                raise Forbidden(f"This admin key is not allowed to see tenant {named!r}.")
            return Grant(Tenant(found.name, found, None, passthrough=False), operator=False,
                         by=f"admin:{found.name}")
        if not self.settings.passthrough_keys or self._find(key, admin=False) is not None:
            raise Unauthorized("Incorrect admin key: use a tenant's admin key or an operator key.")
        scope = passthrough_scope(key)
        if named not in (None, scope) or method not in ("GET", "HEAD", "DELETE"):
            raise Forbidden("A client key may only read and delete its own scope's data.")
        return Grant(Tenant(scope, self.settings.defaults, None, passthrough=True), operator=False,
                     by="client")

    def _operator_tenant(self, named: str | None) -> Tenant:
        if named is None:
            if len(self._named) != 1:
                raise BadRequest("Name the tenant to act on with '?tenant=<name>'.", param="tenant")
            named = next(iter(self._named))
        if named in self._named:
            return Tenant(named, self._named[named], None, passthrough=False)
        if self.settings.passthrough_keys and PASSTHROUGH_SCOPE.fullmatch(named):
            return Tenant(named, self.settings.defaults, None, passthrough=True)
        raise NotFound(f"No tenant {named!r}.", param="tenant")

    def tenant_names(self) -> list[str]:
        return sorted(self._named)


@dataclass(frozen=True)
class Grant:
    """An admin call's right: the tenant it acts on, and who is acting (for history)."""

    tenant: Tenant
    operator: bool
    by: str



def passthrough_scope(key: str) -> str:
    """The tenant id of a passthrough client key: its data scope, named in admin calls as ``?tenant=``."""
    return "key-" + hashlib.sha256(key.encode()).hexdigest()[:24]


# ---------------------------------------------------------------- keys nearly known

# Which values are never forwarded upstream: Paperclip's keys and their near misses.
#
# With ``passthrough_keys: true`` a key that matches no tenant is taken for the
# client's own provider key and sent upstream. Keys Paperclip knows, or nearly
# knows, are refused (401) instead, because sending them would leak a secret of
# this proxy to the provider; the same rule drops a cookie holding one
# (``KeyRing.is_ours``, ``upstream.headers.forwarded_cookies``):
#
# - an operator key or any tenant's admin key (never a client key either);
# - a near miss of a configured plain key (client, admin, operator, metrics).
#   Both sides are compared in ``near_form``: without surrounding whitespace
#   and any number of ``Bearer `` prefixes, in lower case. Near is: equal; one
#   containing the other, the shorter at least ``NEAR_CONTAINED`` characters
#   long (a key with a suffix, a truncated copy, a key inside a longer token);
#   an edit distance of at most ``NEAR_EDITS``; or the same length give or take
#   ``NEAR_EDITS`` and the same first ``max(8, len // 2)`` characters.
#
# Keys configured as ``sha256:<hex>`` can only be recognised exactly (as sent,
# or without ``Bearer `` prefixes and whitespace): store plain keys (from
# ``${ENV}``) to have their near misses refused too.
#
# Cost: a handful of configured keys against one presented value; ``in`` and
# ``lower`` are linear, the edit distance runs only on values within
# ``NEAR_EDITS`` of a key's length; verdicts are remembered.
NEAR_EDITS = 3
NEAR_CONTAINED = 16
_VERDICTS = 4096
# Values longer than this are judged afresh each time, not remembered (a cookie may be kilobytes).
_REMEMBERED_LEN = 512


def bare_key(value: str) -> str:
    """A presented key without surrounding whitespace and without any number of ``Bearer `` prefixes (any case)."""
    value = value.strip()
    while value[:6].lower() == "bearer" and (len(value) == 6 or value[6].isspace()):
        value = value[6:].lstrip()
    return value


def near_form(value: str) -> str:
    """The form keys are compared in for near misses: ``bare_key``, lower-cased."""
    return bare_key(value).lower()


def _forms(key: str) -> tuple[str, ...]:
    """A presented key as sent and, when they differ, bare: both are compared exactly (``sha256:`` keys too)."""
    bare = bare_key(key)
    return (key,) if bare == key or not bare else (key, bare)


def edit_distance(a: str, b: str, bound: int) -> int:
    """Levenshtein distance of ``a`` and ``b``, or ``bound + 1`` once it is known to exceed ``bound``."""
    if abs(len(a) - len(b)) > bound:
        return bound + 1
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        if min(current) > bound:
            return bound + 1
        previous = current
    return min(previous[-1], bound + 1)


def _near(presented: str, known: str) -> bool:
    """Whether two values already in ``near_form`` are a key and a near miss of it."""
    if not presented or not known:
        return False
    if presented == known:
        return True
    shorter, longer = sorted((presented, known), key=len)
    if len(shorter) >= NEAR_CONTAINED and shorter in longer:
        return True
    if abs(len(presented) - len(known)) > NEAR_EDITS:
        return False
    head = max(8, len(known) // 2)
    if len(known) >= head and presented[:head] == known[:head]:
        return True
    return edit_distance(presented, known, NEAR_EDITS) <= NEAR_EDITS


def is_near(presented: str, known: str) -> bool:
    """Whether ``presented`` is ``known`` (a plain key) or a near miss of it."""
    return _near(near_form(presented), near_form(known))


class NearMisses:
    """Remembers its verdicts: passthrough clients send the same key on every request."""

    def __init__(self, plain_keys: Iterable[str]) -> None:
        self._known = [near_form(k) for k in plain_keys if not k.startswith("sha256:")]
        self._verdicts: OrderedDict[str, bool] = OrderedDict()

    def __call__(self, presented: str) -> bool:
        verdict = self._verdicts.get(presented)
        if verdict is None:
            form = near_form(presented)
            verdict = any(_near(form, k) for k in self._known)
            if len(presented) <= _REMEMBERED_LEN:
                self._verdicts[presented] = verdict
                if len(self._verdicts) > _VERDICTS:
                    self._verdicts.popitem(last=False)
        return verdict


# Where a client's key may come, after ``Authorization: Bearer``: Azure's clients, then Anthropic's.
KEY_HEADERS = ("api-key", "x-api-key")


def client_key(headers: Mapping[str, str]) -> str | None:
    auth = headers.get("authorization")
    if auth:
        scheme, _, value = auth.partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip()
    for name in KEY_HEADERS:
        key = headers.get(name, "").strip()
        if key:
            return key
    return None


# The header naming the user (SPEC §4), read as UTF-8 by ``header_text`` and checked by ``header_user``.
USER_HEADER = "x-paperclip-user"
# Headers read as UTF-8 when their bytes are, else as latin-1 (a session is echoed back byte for byte).
# Every other header keeps its latin-1 reading.
UTF8_HEADERS = frozenset({"x-paperclip-session"})


def header_text(name: str, raw: bytes) -> str:
    """A request header's value as text: UTF-8 (as clients send it) for ``USER_HEADER`` and ``UTF8_HEADERS``.

    HTTP header bytes have no declared charset; clients send a session or a
    user named "café" as its UTF-8 bytes. Read as latin-1 they were stored as
    "cafÃ©": ``/sessions/café`` found nothing, and the header's "José" was
    another user than the body's ``"user": "José"``. Session bytes that are
    not UTF-8 keep their latin-1 reading, as before; user bytes that are not
    UTF-8 are kept as surrogate escapes, which ``header_user`` refuses: which
    user they mean cannot be known, and a guess would file the turns under
    a stranger's name.
    """
    if name == USER_HEADER:
        return raw.decode("utf-8", "surrogateescape")
    if name not in UTF8_HEADERS:
        return raw.decode("latin-1")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def header_user(headers: Mapping[str, str]) -> str | None:
    """The user ``X-Paperclip-User`` names (``header_map``'s reading), None when it names none; not UTF-8: 400.

    Every API reads the header through here: chat, Responses, Messages (``resolve_user``) and MCP.
    """
    value = headers.get(USER_HEADER, "")
    if not value.strip():
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # ``header_text`` kept bytes that are not UTF-8 as surrogate escapes
        raise BadRequest(
            "The X-Paperclip-User header is not UTF-8; send the user id as UTF-8 bytes, or in the body's 'user'.",
            code="invalid_user_header",
        ) from None
    return user_id(value)


def resolve_user(headers: Mapping[str, str], body: Mapping[str, Any]) -> str:
    """Header, else ``user``, else ``safety_identifier``, else ``metadata.user_id``."""
    named = header_user(headers)
    if named is not None:
        return named
    candidates: list[Any] = [body.get("user"), body.get("safety_identifier")]
    metadata = body.get("metadata")
    if isinstance(metadata, Mapping):
        candidates.append(metadata.get("user_id"))
    for value in candidates:
        if isinstance(value, str) and value.strip():
            return user_id(claude_code_user(value) or value)
    return ANONYMOUS


def user_id(value: str) -> str:
    """The one form a user id is stored and looked up in: without surrounding spaces."""
    return value.strip()


# Claude Code's ``metadata.user_id``: ``user_<device>_account_<account uuid, or nothing>_session_<uuid>``, and
# since v2.1.78 the JSON ``{"device_id": ..., "account_uuid": ..., "session_id": ...}``.
_CLAUDE_CODE_ID = re.compile(r"(user_[0-9a-f]{16,128}_account_[0-9a-f-]{0,64})_session_[0-9a-zA-Z-]{1,64}")


def claude_code_user(value: str) -> str | None:
    """The user in Claude Code's ``metadata.user_id``, which also names the run: ``user_<device>_account_<account>``
    in both of its forms, without the session. None for any other value.

    Each ``claude`` run sends a new session id in it, so taken whole it would make every run a new user with
    no memories; the device and account are who is there.
    """
    text = value.strip()
    if (found := _CLAUDE_CODE_ID.fullmatch(text)) is not None:
        return found.group(1)
    if not text.startswith("{") or '"session_id"' not in text:
        return None
    try:
        ids = json.loads(text)
    except ValueError:
        return None
    device, account = (ids.get("device_id"), ids.get("account_uuid")) if isinstance(ids, dict) else (None, None)
    if not isinstance(device, str) or not device.strip() or not isinstance(account, str | None):
        return None
    return f"user_{device.strip()}_account_{(account or '').strip()}"


def derive_session(tenant_id: str, user: str, messages: Sequence[Mapping[str, Any]]) -> str:
    """A stable session id for an unmodified client: tenant, user and the first non-system message.

    A message that is all context a client added (``message_text.only_client_context``: Codex sends its
    AGENTS.md and environment first, the same in every conversation of a folder) names no conversation:
    the first message after it does (or it, when no other is there).
    This form is part of every stored session key: changing it starts every
    derived conversation afresh.
    """
    conversation = (m for m in messages if m.get("role") not in ("system", "developer"))
    opening: Mapping[str, Any] | None = None
    first: Mapping[str, Any] | None = None
    for m in conversation:  # a long history is read only as far as its first words
        opening = opening or m
        if not only_client_context(m):
            first = m
            break
    first = first or opening or {}
    h = hashlib.sha256()
    for part in (tenant_id.encode(), b"\0", user.encode(), b"\0", canonical(first)):
        h.update(part)
    return "s-" + h.hexdigest()[:32]


def conversation_session(tenant_id: str, user: str, conversation: str) -> str:
    """The session of a Responses API ``conversation`` (the provider holds its items): one per conversation
    id, whatever each request sends (only its new items)."""
    h = hashlib.sha256()
    for part in (tenant_id.encode(), b"\0", user.encode(), b"\0conversation\0", conversation.encode()):
        h.update(part)
    return "s-" + h.hexdigest()[:32]


def resolve_session(
    headers: Mapping[str, str], tenant_id: str, user: str, messages: Sequence[Mapping[str, Any]]
) -> str:
    explicit = headers.get("x-paperclip-session")
    if explicit and explicit.strip():
        return explicit.strip()
    return derive_session(tenant_id, user, messages)
