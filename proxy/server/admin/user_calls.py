"""Admin calls on a tenant's users: list them, a user's sessions, export, forget."""

from __future__ import annotations

import datetime as dt
from typing import Any

from starlette.responses import JSONResponse, Response

from ...memory.curation.memory_admin import MemoryAdmin
from ...memory.recall.cards import render_block, render_card
from ...memory.recall.profile import listing
from ...tenancy import Tenant
from ...tokens import TokenCounter
from .admin_call import AdminCall
from .pagination import after_cursor, page, page_ask


async def list_users(call: AdminCall) -> Response:
    """Users in name order, each with counts of memories, fragments, sessions, requests and last seen."""
    ask = page_ask(call.request.query_params)
    rows = await call.admin.store.listings.users(call.tenant.id, ask.after, ask.fetch)
    return JSONResponse(page(rows, ask, tenant=call.tenant.id))


async def user_sessions(call: AdminCall) -> Response:
    """The user's sessions, the latest begun first: a walk by ``after`` is not moved by new turns."""
    user = call.request.path_params["user"]
    ask = page_ask(call.request.query_params)
    rows = await call.admin.store.listings.sessions(call.tenant.id, user)
    return JSONResponse(page(after_cursor(rows, ask), ask, user=user))


async def export_user(call: AdminCall) -> Response:
    return JSONResponse(await call.admin.export(call.tenant.id, call.request.path_params["user"]))


async def get_profile(call: AdminCall) -> Response:
    return JSONResponse(await user_profile(call.admin, call.tenant, call.request.path_params["user"]))


async def user_profile(admin: MemoryAdmin, tenant: Tenant, user: str) -> dict[str, Any]:
    """The standing facts that lead the user's memory block, as the next request would get them.

    What ``GET .../profile`` answers, and the MCP tool ``get_profile``.
    """
    mem = tenant.settings.memory
    facts = await admin.items(tenant.id, user)
    marked = await admin.changed_by_turns(tenant.id, user, facts)
    profile, listed = listing(facts, mem, TokenCounter(), dt.datetime.now(dt.UTC), marked)
    data = [{**f.public(), "card": render_card(c), "within_budget": within} for f, c, within in listed]
    return {
        "object": "paperclip.profile", "user": user, "enabled": mem.profile,
        "budget_tokens": mem.profile_budget_tokens, "tokens": profile.tokens, "data": data,
        "block": render_block(profile.cards) if profile.cards else None,
    }


async def forget_user(call: AdminCall) -> Response:
    user = call.request.path_params["user"]
    counts = await call.admin.forget(call.tenant.id, user)
    return JSONResponse({"user": user, "object": "paperclip.user", "deleted": True, "counts": counts})
