"""Admin calls on what happened: sessions, traces of requests, token usage, the tenants."""

from __future__ import annotations

import datetime as dt
from typing import Any

from starlette.responses import JSONResponse, Response

from ...errors import BadRequest, NotFound
from ...store.interface import Traces
from ..usage_ledger import combine
from .admin_call import AdminCall
from .pagination import PageAsk, after_cursor, cursor_gone, page, page_ask


async def get_session(call: AdminCall) -> Response:
    session = call.request.path_params["session"]
    store = call.admin.store
    state = await store.sessions.describe(call.tenant.id, session)
    activity = await store.users.session_activity(call.tenant.id, session)
    if state is None and activity is None:
        raise NotFound(f"No session {session!r}.")
    empty = {"session": session, "prefixes": [], "watermark": 0, "summaries": []}
    return JSONResponse({"object": "paperclip.session", **(state or empty), **(activity or {})})


async def list_traces(call: AdminCall) -> Response:
    """Recent requests, newest first; ``?user=``, ``?session=``, ``?degraded=true|false`` filter."""
    q = call.request.query_params
    ask = page_ask(q)
    degraded = {"true": True, "false": False, "": None}.get(q.get("degraded", "").strip().lower(), "bad")
    if degraded == "bad":
        raise BadRequest("'degraded' must be true or false.", param="degraded")
    rows = await traces_after(
        call.admin.store.traces, call.tenant.id, ask, user=q.get("user") or None, session=q.get("session") or None,
        degraded=degraded if isinstance(degraded, bool) else None,
    )
    return JSONResponse(page(rows, ask))


async def traces_after(
    traces: Traces, tenant: str, ask: PageAsk, *, user: str | None, session: str | None, degraded: bool | None = None,
) -> list[dict[str, Any]]:
    """The traces of a page (``ask.fetch`` of them, newest first, filtered); a cursor whose trace is gone is
    ``cursor_gone``: the store places a cursor by its row, so a pruned one would end the walk. The admin API's
    list and the inspector's page both read them here."""
    rows = await traces.recent(tenant, user=user, session=session, degraded=degraded, after=ask.after, limit=ask.fetch)
    if ask.after is not None and not rows and await traces.get(tenant, ask.after) is None:
        raise cursor_gone(ask.after)
    return rows


async def get_trace(call: AdminCall) -> Response:
    trace = call.request.path_params["trace"]
    data = await call.admin.store.traces.get(call.tenant.id, trace)
    if data is None:
        raise NotFound(f"No trace {trace!r}.")
    return JSONResponse({"object": "paperclip.trace", **data})


async def usage(call: AdminCall) -> Response:
    """Tokens per tenant, model and day: sent by clients, forwarded, billed (``?since=&until=`` days)."""
    q = call.request.query_params
    since, until = _day(q.get("since"), "since"), _day(q.get("until"), "until")
    tenant = call.grant.tenant.id if call.grant is not None else None
    stored = []
    store = call.runtime.store()
    if store is not None:
        stored = await store.usage.rows(tenant, since, until)
    pending = [
        r for r in call.runtime.accounting.ledger.unwritten()
        if tenant in (None, r["tenant"]) and (since or "") <= r["day"] <= (until or "9999")
    ]
    rows = [{"id": _usage_id(r), "object": "paperclip.usage", **r} for r in combine(stored + pending)]
    ask = page_ask(q, default=100)
    return JSONResponse(page(after_cursor(rows, ask), ask))


async def list_tenants(call: AdminCall) -> Response:
    """Configured tenants and, for an operator, the passthrough scopes that hold data."""
    if call.grant is not None:
        names = [call.grant.tenant.id]
    else:
        store = call.runtime.store()
        stored = await store.listings.tenants() if store is not None else []
        names = sorted({*call.runtime.keys.tenant_names(), *stored})
    configured = set(call.runtime.keys.tenant_names())
    rows = [
        {"id": n, "object": "paperclip.tenant", "kind": "tenant" if n in configured else "passthrough"}
        for n in names
    ]
    ask = page_ask(call.request.query_params, default=100)
    return JSONResponse(page(after_cursor(rows, ask), ask))


def _day(raw: str | None, name: str) -> str | None:
    if not raw:
        return None
    try:
        return dt.date.fromisoformat(raw.strip()).isoformat()
    except ValueError as exc:
        raise BadRequest(f"'{name}' must be a day, YYYY-MM-DD.", param=name) from exc


def _usage_id(row: dict[str, object]) -> str:
    return f"{row['day']}/{row['tenant']}/{row['model']}"
