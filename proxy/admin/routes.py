"""The admin API under ``/paperclip/v1`` (SPEC §6): memories, profile, export, forget, sessions, traces.

Every call takes a tenant's admin key (``Authorization: Bearer <admin key>``
or ``api-key``) and sees that tenant's data only: the tenant comes from the
key, never from the request. Errors go out in OpenAI's envelope; until the
memory layer is loaded every call answers 503.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import unquote

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Match, Route
from starlette.types import Scope

from ..errors import BadRequest, MemoryNotReady, NotFound, PaperclipError
from ..jsonbody import parse_json
from ..memory.cards import render_block, render_card
from ..memory.profile import profile_of
from ..runtime import Runtime
from ..tenancy import Tenant, client_key, user_id
from ..tokens import TokenCounter
from .memories import SEARCH_LIMIT, Found, MemoryAdmin

log = logging.getLogger("paperclip.admin")

PREFIX = "/paperclip/v1"
MAX_ROW_ID = 2**63 - 1  # SQLite's largest integer
# A forget first lets the recording of the user's finished requests land, so
# none of it is written after the delete; bounded, as traffic never stops.
SETTLE_S = 10.0

Handler = Callable[[Request, Tenant, MemoryAdmin], Awaitable[Response]]


class EncodedRoute(Route):
    """Matches the path as it was sent, percent-encoded, and decodes each parameter after.

    A user id holding "/" arrives as ``%2F``; matched on the decoded path it
    would split into two segments and match nothing.
    """

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        raw = scope.get("raw_path")
        if not raw:
            return super().matches(scope)
        match, child = super().matches({**scope, "path": raw.decode("latin-1"), "root_path": ""})
        if match is not Match.NONE:
            child["path_params"] = {k: unquote(v) for k, v in child["path_params"].items()}
        return match, child


def admin_routes(runtime: Runtime) -> list[BaseRoute]:
    def route(path: str, handler: Handler, method: str) -> Route:
        return EncodedRoute(PREFIX + path, _guarded(runtime, handler), methods=[method])

    return [
        route("/users/{user}/memories", list_memories, "GET"),
        route("/users/{user}/memories", add_memory, "POST"),
        route("/users/{user}/memories/{item}", delete_memory, "DELETE"),
        route("/users/{user}/export", export_user, "GET"),
        route("/users/{user}/profile", get_profile, "GET"),
        route("/users/{user}", forget_user, "DELETE"),
        route("/sessions/{session}", get_session, "GET"),
        route("/traces/{trace}", get_trace, "GET"),
    ]


def _guarded(runtime: Runtime, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """Authenticate, check the memory layer is up, run ``handler``; render any error once."""

    async def endpoint(request: Request) -> Response:
        try:
            tenant = runtime.keys.admin_tenant_for(client_key(request.headers))
            if "user" in request.path_params:  # one rule with the chat path's: surrounding spaces are not the id
                request.path_params["user"] = user_id(request.path_params["user"])
            return await handler(request, tenant, _admin(runtime))
        except PaperclipError as exc:
            return JSONResponse(exc.envelope(), status_code=exc.status)
        except Exception:
            log.exception("admin call %s %s failed", request.method, request.url.path)
            failed = PaperclipError("The admin call failed inside Paperclip; see its log.")
            return JSONResponse(failed.envelope(), status_code=failed.status)

    return endpoint


def _admin(runtime: Runtime) -> MemoryAdmin:
    memory = runtime.memory
    if memory is None:
        raise MemoryNotReady("The memory layer is not ready yet; try again shortly.")
    if runtime.problem is not None:  # its database is gone or read-only (readiness.py)
        raise MemoryNotReady(f"The memory layer is off: {runtime.problem}.")
    return MemoryAdmin(memory.store, memory.fragments.embed, [memory.forget_scope], lambda: _settle(runtime))


async def _settle(runtime: Runtime) -> None:
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(SETTLE_S):
            await runtime.background.drain()


# ---------------------------------------------------------------- memories


async def list_memories(request: Request, tenant: Tenant, admin: MemoryAdmin) -> Response:
    user = request.path_params["user"]
    include_inactive = _flag(request, "all")
    query = request.query_params.get("q", "").strip()
    if not query:
        rows = await admin.items(tenant.id, user, include_inactive=include_inactive)
        return _list(user, [r.public() for r in rows])
    mem = tenant.settings.memory
    found = await admin.search(
        tenant.id, user, query, include_inactive=include_inactive,
        weights=(mem.vector_weight, mem.bm25_weight), limit=_limit(request),
    )
    return _list(user, [_found(f) for f in found], query=query)


async def add_memory(request: Request, tenant: Tenant, admin: MemoryAdmin) -> Response:
    body = await parse_json(await request.body())
    mem = tenant.settings.memory
    added = await admin.add(
        tenant.id, request.path_params["user"], body, pii=mem.pii, dedup_cosine=mem.dedup_cosine
    )
    payload = {"action": added.action, "item": added.item.public(), "superseded": list(added.superseded)}
    return JSONResponse(payload, status_code=200 if added.action == "merged" else 201)


async def delete_memory(request: Request, tenant: Tenant, admin: MemoryAdmin) -> Response:
    user, raw = request.path_params["user"], request.path_params["item"]
    item = _item_id(raw)
    if item is None or not await admin.delete(tenant.id, user, item):
        raise NotFound(f"No memory {raw!r} for user {user!r}.")
    return JSONResponse({"id": item, "object": "paperclip.memory", "deleted": True})


# ---------------------------------------------------------------- users


async def export_user(request: Request, tenant: Tenant, admin: MemoryAdmin) -> Response:
    return JSONResponse(await admin.export(tenant.id, request.path_params["user"]))


async def get_profile(request: Request, tenant: Tenant, admin: MemoryAdmin) -> Response:
    """The standing facts that lead the user's memory block, as the next request would get them."""
    user, mem = request.path_params["user"], tenant.settings.memory
    rows = {r.id: r for r in await admin.items(tenant.id, user)}
    profile = profile_of(rows.values(), mem, TokenCounter(), dt.datetime.now(dt.UTC))
    data = [{**rows[int(c.id[1:])].public(), "card": render_card(c)} for c in profile.cards]
    return JSONResponse({
        "object": "paperclip.profile", "user": user, "enabled": mem.profile,
        "budget_tokens": mem.profile_budget_tokens, "tokens": profile.tokens, "data": data,
        "block": render_block(profile.cards) if profile.cards else None,
    })


async def forget_user(request: Request, tenant: Tenant, admin: MemoryAdmin) -> Response:
    user = request.path_params["user"]
    counts = await admin.forget(tenant.id, user)
    return JSONResponse({"user": user, "object": "paperclip.user", "deleted": True, "counts": counts})


# ---------------------------------------------------------------- sessions and traces


async def get_session(request: Request, tenant: Tenant, admin: MemoryAdmin) -> Response:
    session = request.path_params["session"]
    state = await admin.store.sessions.describe(tenant.id, session)
    activity = await admin.store.users.session_activity(tenant.id, session)
    if state is None and activity is None:
        raise NotFound(f"No session {session!r}.")
    empty = {"session": session, "prefixes": [], "watermark": 0, "summaries": []}
    return JSONResponse({"object": "paperclip.session", **(state or empty), **(activity or {})})


async def get_trace(request: Request, tenant: Tenant, admin: MemoryAdmin) -> Response:
    trace = request.path_params["trace"]
    data = await admin.store.traces.get(tenant.id, trace)
    if data is None:
        raise NotFound(f"No trace {trace!r}.")
    return JSONResponse({"object": "paperclip.trace", **data})


# ---------------------------------------------------------------- helpers


def _list(user: str, data: list[dict[str, Any]], **extra: Any) -> Response:
    return JSONResponse({"object": "list", "user": user, **extra, "data": data})


def _found(found: Found) -> dict[str, Any]:
    return {**found.item.public(), "score": found.score, "vector": found.vector, "bm25": found.bm25}


def _item_id(raw: str) -> int | None:
    """A memory id as the store can hold it (a positive 64-bit integer), else None."""
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 19 or int(raw) > MAX_ROW_ID:
        return None
    return int(raw)


def _flag(request: Request, name: str) -> bool:
    value = request.query_params.get(name, "false").strip().lower()
    if value not in ("true", "false", "1", "0", "yes", "no"):
        raise BadRequest(f"'{name}' must be true or false.", param=name)
    return value in ("true", "1", "yes")


def _limit(request: Request) -> int:
    raw = request.query_params.get("limit", str(SEARCH_LIMIT))
    if not raw.isdigit() or not 1 <= int(raw) <= 100:
        raise BadRequest("'limit' must be an integer from 1 to 100.", param="limit")
    return int(raw)

