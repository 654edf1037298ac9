"""Admin calls on the raw turns Paperclip recalls from: list and search them, delete one, forget a session."""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse, Response

from ...errors import BadRequest, NotFound
from ...memory.curation.memory_admin import SEARCH_POOL
from ...memory.curation.turn_search import FoundTurn
from ...store.records import FRAGMENT_STATUSES, StoredFragment
from .admin_call import AdminCall
from .memory_calls import row_id, status_param
from .pagination import after_cursor, page, page_ask


async def list_fragments(call: AdminCall) -> Response:
    """``?q=`` searches the active turns (best first, paged through the best ``SEARCH_POOL``); otherwise a
    page in id order.
    ``?session=`` keeps one conversation's turns; ``?status=`` filters (default active)."""
    request, user = call.request, call.request.path_params["user"]
    status = status_param(request, FRAGMENT_STATUSES)
    session = request.query_params.get("session", "").strip() or None
    ask = page_ask(request.query_params)
    query = request.query_params.get("q", "").strip()
    if query:
        mem = call.tenant.settings.memory
        found = await call.admin.search_turns(
            call.tenant.id, user, query, session=session, weights=(mem.vector_weight, mem.bm25_weight),
            limit=SEARCH_POOL,
        )
        rows = [_found(f) for f in found] if status in ("active", "all") else []
        return JSONResponse(page(after_cursor(rows, ask), ask, user=user, query=query))
    after = row_id(ask.after) if ask.after else None
    if ask.after and after is None:
        raise BadRequest("'after' must be a fragment id.", param="after")
    listed = await call.admin.store.listings.fragments(
        call.tenant.id, user, after=after, limit=ask.fetch, session=session,
        status=None if status == "all" else status,
    )
    return JSONResponse(page([f.public() for f in listed], ask, user=user))


async def delete_fragment(call: AdminCall) -> Response:
    """Delete one turn from the store, and the memories drawn only from it."""
    user, raw = call.request.path_params["user"], call.request.path_params["fragment"]
    fragment = row_id(raw)
    forgot = None if fragment is None else await call.admin.forget_turn(call.tenant.id, user, fragment)
    if forgot is None:
        raise NotFound(f"No fragment {raw!r} for user {user!r}.")
    return JSONResponse({"id": fragment, "object": "paperclip.fragment", "deleted": True,
                         "memories": list(forgot.items)})


async def forget_session(call: AdminCall) -> Response:
    """Forget a whole conversation (``memory_admin.forget_session``); 404 when nothing names it."""
    session = call.request.path_params["session"]
    counts = await call.admin.forget_session(call.tenant.id, session)
    if counts is None:
        raise NotFound(f"No session {session!r}.")
    return JSONResponse({"id": session, "object": "paperclip.session", "deleted": True, "counts": counts})


def _found(found: FoundTurn) -> dict[str, Any]:
    row = StoredFragment.active(found.fragment).public()
    return {**row, "score": found.score, "vector": found.vector, "bm25": found.bm25}
