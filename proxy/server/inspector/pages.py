"""The inspector's pages: users, a user (profile, memories, sessions), a user's conversations and their
turns (search, delete), a session's pyramid, traces."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from starlette.responses import Response

from ...errors import BadRequest, NotFound
from ...memory.curation.memory_admin import MemoryAdmin
from ...memory.memory_schema import TYPES
from ...memory.recall.profile import listing
from ...store.records import StoredFragment
from ...tokens import TokenCounter
from ..admin.activity_calls import traces_after
from ..admin.admin_call import memory_admin
from ..admin.pagination import after_cursor, page_ask
from .page_guard import Page
from .pyramid import pyramid

PAGE_ROWS = 50
STATUSES = ("active", "superseded", "archived", "all")


async def users_page(page: Page) -> Response:
    ask = page_ask(page.request.query_params, default=PAGE_ROWS)
    rows = await _admin(page).store.listings.users(page.tenant, ask.after, ask.fetch)
    return page.render("users.html", users=rows[: ask.limit], more=rows[ask.limit - 1]["id"]
                       if len(rows) > ask.limit else None)


async def user_page(page: Page) -> Response:
    q = page.request.query_params
    user, admin = page.request.path_params["user"], _admin(page)
    query, kind, status = q.get("q", "").strip(), q.get("type") or None, q.get("status") or "active"
    if (kind is not None and kind not in TYPES) or status not in STATUSES:
        raise BadRequest("Unknown type or status filter.")
    ask = page_ask(q, default=PAGE_ROWS)
    more = None
    if query:
        mem = page.grant.tenant.settings.memory
        found = await admin.search(page.tenant, user, query, include_inactive=status != "active",
                                   weights=(mem.vector_weight, mem.bm25_weight), limit=PAGE_ROWS)
        memories = [{**f.item.public(), "score": f.score, "vector": f.vector, "bm25": f.bm25}
                    for f in found if kind in (None, f.item.type) and status in ("all", f.item.status)]
    else:
        after = int(ask.after) if ask.after and ask.after.isdigit() else None
        rows = await admin.store.listings.items(page.tenant, user, after=after, limit=ask.fetch,
                                                status=None if status == "all" else status, kind=kind)
        memories = [r.public() for r in rows[: ask.limit]]
        more = str(memories[-1]["id"]) if len(rows) > ask.limit else None
    # A glance at what the user did last: by last activity (the paged lists keep the store's order).
    every = await admin.store.listings.sessions(page.tenant, user)
    sessions = sorted(every, key=lambda s: s["last_seen"], reverse=True)[:20]
    traces = await admin.store.traces.recent(page.tenant, user=user, limit=10)
    return page.render(
        "user.html", user=user, memories=memories, more=more, query=query, kind=kind, status=status,
        types=sorted(TYPES), statuses=STATUSES, profile=await _profile(page, admin, user),
        sessions=sessions, traces=traces,
    )


async def conversations_page(page: Page) -> Response:
    """The user's conversations, the latest begun first (``Listings.sessions``), and a search of their turns
    (``?q=``)."""
    q = page.request.query_params
    user, admin = page.request.path_params["user"], _admin(page)
    query = q.get("q", "").strip()
    found: list[dict[str, Any]] = []
    if query:
        mem = page.grant.tenant.settings.memory
        turns = await admin.search_turns(page.tenant, user, query, weights=(mem.vector_weight, mem.bm25_weight),
                                         limit=PAGE_ROWS)
        found = [{**StoredFragment.active(t.fragment).public(), "score": t.score} for t in turns]
    ask = page_ask(q, default=PAGE_ROWS)
    rows = after_cursor(await admin.store.listings.sessions(page.tenant, user), ask)
    more = rows[ask.limit - 1]["id"] if len(rows) > ask.limit else None
    return page.render("conversations.html", user=user, query=query, found=found, sessions=rows[: ask.limit],
                       more=more)


async def conversation_page(page: Page) -> Response:
    """One conversation's turns in order, whatever their status, each with a delete button."""
    user, session = page.request.path_params["user"], page.request.path_params["session"]
    ask = page_ask(page.request.query_params, default=PAGE_ROWS)
    after = int(ask.after) if ask.after and ask.after.isdigit() else None
    rows = await _admin(page).store.listings.fragments(page.tenant, user, after=after, limit=ask.fetch,
                                                       session=session, status=None)
    turns = [r.public() for r in rows[: ask.limit]]
    more = str(turns[-1]["id"]) if len(rows) > ask.limit else None
    return page.render("conversation.html", user=user, session=session, turns=turns, more=more)


async def export_page(page: Page) -> Response:
    user = page.request.path_params["user"]
    data = await _admin(page).export(page.tenant, user)
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in user) or "user"
    return Response(
        json.dumps(data, ensure_ascii=False, indent=1), media_type="application/json",
        headers={"content-disposition": f'attachment; filename="paperclip-{name}.json"'},
    )


async def session_page(page: Page) -> Response:
    session = page.request.path_params["session"]
    store = _admin(page).store
    state = await store.sessions.describe(page.tenant, session)
    activity = await store.users.session_activity(page.tenant, session)
    if state is None and activity is None:
        raise NotFound(f"No session {session!r}.")
    state = state or {"summaries": [], "prefixes": [], "watermark": 0}
    return page.render("session.html", session=session, state=state, activity=activity or {},
                       rows=pyramid(state["summaries"], state["watermark"]))


async def traces_page(page: Page) -> Response:
    q = page.request.query_params
    ask = page_ask(q, default=PAGE_ROWS)
    rows = await traces_after(
        _admin(page).store.traces, page.tenant, ask, user=q.get("user") or None, session=q.get("session") or None,
    )
    more = rows[ask.limit - 1]["id"] if len(rows) > ask.limit else None
    return page.render("traces.html", traces=rows[: ask.limit], more=more, user=q.get("user") or "")


async def trace_page(page: Page) -> Response:
    trace = page.request.path_params["trace"]
    data = await _admin(page).store.traces.get(page.tenant, trace)
    if data is None:
        raise NotFound(f"No trace {trace!r}.")
    # A card of adjacent turns names each of them: "f12,f13".
    injected = {i for card in data.get("injected") or [] for i in str(card).split(",")}
    candidates = [
        {**c, "rank": n, "injected": str(c.get("id")) in injected}
        for n, c in enumerate(data.get("candidates") or [], start=1)
    ]
    return page.render("trace.html", trace=data, candidates=candidates)


async def _profile(page: Page, admin: MemoryAdmin, user: str) -> list[dict[str, Any]]:
    """The standing facts that lead the user's memory block, as the next request would get them."""
    mem = page.grant.tenant.settings.memory
    facts = await admin.items(page.tenant, user)
    marked = await admin.changed_by_turns(page.tenant, user, facts)
    _, listed = listing(facts, mem, TokenCounter(), dt.datetime.now(dt.UTC), marked)
    return [{**f.public(), "within_budget": within} for f, _, within in listed]


def _admin(page: Page) -> MemoryAdmin:
    return memory_admin(page.runtime)
