"""Admin calls on one user's memories: list and search, add, read, edit, delete, history."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ...errors import BadRequest, NotFound
from ...memory.curation.memory_admin import SEARCH_POOL, Found, MemoryAdmin
from ...memory.memory_schema import TYPES
from ...tenancy import Tenant
from ..jsonbody import parse_json
from .admin_call import AdminCall
from .pagination import PageAsk, after_cursor, page, page_ask

STATUSES = ("active", "superseded", "archived")
MAX_ROW_ID = 2**63 - 1  # SQLite's largest integer


async def list_memories(call: AdminCall) -> Response:
    """``?q=`` searches (best first, one page); otherwise a page in id order. ``?status=``, ``?type=`` filter."""
    request, user = call.request, call.request.path_params["user"]
    ask = page_ask(request.query_params)
    query = request.query_params.get("q", "").strip()
    listed = await memory_page(call.admin, call.tenant, user, ask, query, _status(request), _kind(request))
    return JSONResponse(listed)


async def memory_page(
    admin: MemoryAdmin, tenant: Tenant, user: str, ask: PageAsk, query: str = "", status: str = "active",
    kind: str | None = None,
) -> dict[str, Any]:
    """A page of the user's memories: the best matches of ``query`` when there is one, else in id order.

    What ``GET .../memories`` answers, and the MCP tools ``search_memories`` and ``list_memories``.
    """
    if query:
        mem = tenant.settings.memory
        found = await admin.search(
            tenant.id, user, query, include_inactive=status != "active",
            weights=(mem.vector_weight, mem.bm25_weight), limit=SEARCH_POOL,
        )
        rows = [_found(f) for f in found if _keeps(f.item.status, f.item.type, status, kind)]
        return page(after_cursor(rows, ask), ask, user=user, query=query)
    after = _item_id(ask.after, "after") if ask.after else None
    items = await admin.store.listings.items(
        tenant.id, user, after=after, limit=ask.fetch, status=None if status == "all" else status, kind=kind,
    )
    return page([r.public() for r in items], ask, user=user)


async def add_memory(call: AdminCall) -> Response:
    by = call.grant.by if call.grant is not None else None
    payload = await added_memory(call.admin, call.tenant, call.request.path_params["user"],
                                 await json_body(call.request), by)
    return JSONResponse(payload, status_code=200 if payload["action"] == "merged" else 201)


async def added_memory(admin: MemoryAdmin, tenant: Tenant, user: str, body: Any, by: str | None) -> dict[str, Any]:
    """Add a memory written by hand (``body`` as ``POST .../memories`` takes it), credited to ``by``.

    What ``POST .../memories`` answers, and the MCP tool ``add_memory``.
    """
    mem = tenant.settings.memory
    added = await admin.add(tenant.id, user, body, pii=mem.pii, dedup_cosine=mem.dedup_cosine)
    if added.action != "merged" and by is not None:
        await admin.store.edits.credit(tenant.id, user, added.item.id, by)
    return {"action": added.action, "item": added.item.public(), "superseded": list(added.superseded)}


async def get_memory(call: AdminCall) -> Response:
    user, item = _target(call.request)
    found = await call.admin.store.items.get(call.tenant.id, user, [item])
    if item not in found:
        raise _missing(call.request)
    return JSONResponse(found[item].public())


async def edit_memory(call: AdminCall) -> Response:
    user, item = _target(call.request)
    assert call.grant is not None
    edited = await call.admin.edit(
        call.tenant.id, user, item, await json_body(call.request),
        pii=call.tenant.settings.memory.pii, by=call.grant.by,
    )
    if edited is None:
        raise _missing(call.request)
    return JSONResponse(edited.public())


async def delete_memory(call: AdminCall) -> Response:
    """Forget one memory: its source turns are never injected again; ``?purge=true`` deletes them."""
    user, item = _target(call.request)
    return JSONResponse(await deleted_memory(call.admin, call.tenant, user, item, purge=flag(call.request, "purge")))


async def deleted_memory(
    admin: MemoryAdmin, tenant: Tenant, user: str, item: int, *, purge: bool = False
) -> dict[str, Any]:
    """Forget one memory (its source turns are never injected again; ``purge`` deletes them);
    ``NotFound`` when the user has no such memory.

    What ``DELETE .../memories/{id}`` answers, and the MCP tool ``forget_memory``.
    """
    forgot = await admin.forget_memory(tenant.id, user, item, purge=purge) if 0 < item <= MAX_ROW_ID else None
    if forgot is None:
        raise NotFound(f"No memory {str(item)!r} for user {user!r}.")
    return {"id": item, "object": "paperclip.memory", "deleted": True, "memories": list(forgot.items),
            "turns": forgot.turns, "purged": forgot.purged}


async def memory_history(call: AdminCall) -> Response:
    user, item = _target(call.request)
    events = await call.admin.history(call.tenant.id, user, item)
    if events is None:
        raise _missing(call.request)
    ask = page_ask(call.request.query_params, default=100)
    after = row_id(ask.after) if ask.after else 0
    if after is None:
        raise BadRequest("'after' must be the id of an event of this history.", param="after")
    return JSONResponse(page([e for e in events if e["id"] > after][: ask.fetch], ask, item=item))


# ---------------------------------------------------------------- helpers


async def json_body(request: Request) -> Any:
    return await parse_json(await request.body())


def _target(request: Request) -> tuple[str, int]:
    item = row_id(request.path_params["item"])
    if item is None:
        raise _missing(request)
    return request.path_params["user"], item


def _missing(request: Request) -> NotFound:
    p = request.path_params
    return NotFound(f"No memory {p['item']!r} for user {p['user']!r}.")


def _item_id(raw: str, name: str) -> int:
    item = row_id(raw)
    if item is None:
        raise BadRequest(f"'{name}' must be a memory id.", param=name)
    return item


def row_id(raw: str) -> int | None:
    """A memory id as the store can hold it (a positive 64-bit integer), else None."""
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 19 or int(raw) > MAX_ROW_ID:
        return None
    return int(raw)


def _status(request: Request) -> str:
    return status_param(request, STATUSES)


def status_param(request: Request, statuses: tuple[str, ...]) -> str:
    """``?status=`` (default active) among ``statuses`` or all; ``?all=true`` means all."""
    if flag(request, "all"):
        return "all"
    value = request.query_params.get("status", "active").strip().lower()
    if value not in (*statuses, "all"):
        raise BadRequest(f"'status' must be one of {', '.join(statuses)} or all.", param="status")
    return value


def _kind(request: Request) -> str | None:
    value = request.query_params.get("type", "").strip().lower() or None
    if value is not None and value not in TYPES:
        raise BadRequest(f"'type' must be one of {', '.join(sorted(TYPES))}.", param="type")
    return value


def _keeps(item_status: str, item_type: str, status: str, kind: str | None) -> bool:
    return status in ("all", item_status) and kind in (None, item_type)


def flag(request: Request, name: str) -> bool:
    """A true/false query parameter (absent: false); anything else is a 400 naming it."""
    value = request.query_params.get(name, "false").strip().lower()
    if value not in ("true", "false", "1", "0", "yes", "no"):
        raise BadRequest(f"'{name}' must be true or false.", param=name)
    return value in ("true", "1", "yes")


def _found(found: Found) -> dict[str, Any]:
    return {**found.item.public(), "score": found.score, "vector": found.vector, "bm25": found.bm25}
