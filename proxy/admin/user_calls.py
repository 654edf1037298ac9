"""Admin calls on a tenant's users: list them, a user's sessions, export, forget."""

from __future__ import annotations

from starlette.responses import JSONResponse, Response

from .call import AdminCall
from .pagination import after_cursor, page, page_ask


async def list_users(call: AdminCall) -> Response:
    """Users in name order, each with counts of memories, fragments, sessions, requests and last seen."""
    ask = page_ask(call.request.query_params)
    rows = await call.admin.store.listings.users(call.tenant.id, ask.after, ask.fetch)
    return JSONResponse(page(rows, ask, tenant=call.tenant.id))


async def user_sessions(call: AdminCall) -> Response:
    """The user's sessions, most recently active first."""
    user = call.request.path_params["user"]
    ask = page_ask(call.request.query_params)
    rows = await call.admin.store.listings.sessions(call.tenant.id, user)
    return JSONResponse(page(after_cursor(rows, ask), ask, user=user))


async def export_user(call: AdminCall) -> Response:
    return JSONResponse(await call.admin.export(call.tenant.id, call.request.path_params["user"]))


async def forget_user(call: AdminCall) -> Response:
    user = call.request.path_params["user"]
    counts = await call.admin.forget(call.tenant.id, user)
    return JSONResponse({"user": user, "object": "paperclip.user", "deleted": True, "counts": counts})
