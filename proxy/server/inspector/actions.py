"""The inspector's forms: edit a memory, delete it (with its turns), delete a turn, forget a
conversation, forget the user. Each redirects back (303)."""

from __future__ import annotations

from urllib.parse import quote

from starlette.responses import RedirectResponse, Response

from ...errors import NotFound
from ..admin.admin_call import memory_admin
from .page_guard import Page


async def edit_memory(page: Page) -> Response:
    user, item = _target(page)
    form = page.form
    body: dict[str, object] = {"content": form.get("content", ""), "type": form.get("type", "")}
    if form.get("importance", "").strip():
        try:
            body["importance"] = float(form["importance"])
        except ValueError:
            body["importance"] = form["importance"]  # refused by the same check as the API's
    body["expires_at"] = form.get("expires_at", "").strip() or None
    edited = await memory_admin(page.runtime).edit(
        page.tenant, user, item, body, pii=page.grant.tenant.settings.memory.pii, by=page.grant.by + " (ui)"
    )
    if edited is None:
        raise NotFound(f"No memory {item} for user {user!r}.")
    return _back(page, user, f"#m{item}")


async def delete_memory(page: Page) -> Response:
    """Delete a memory; with ``purge`` ticked, the turns it came from are deleted too."""
    user, item = _target(page)
    purge = page.form.get("purge", "") == "yes"
    if not await memory_admin(page.runtime).delete(page.tenant, user, item, purge=purge):
        raise NotFound(f"No memory {item} for user {user!r}.")
    return _back(page, user)


async def delete_fragment(page: Page) -> Response:
    """Delete one turn (and the memories drawn only from it); back to its conversation."""
    user, raw = page.request.path_params["user"], page.request.path_params["fragment"]
    if not raw.isdigit() or await memory_admin(page.runtime).forget_turn(page.tenant, user, int(raw)) is None:
        raise NotFound(f"No turn {raw!r} for user {user!r}.")
    session = page.form.get("session", "")
    where = f"/conversations/{quote(session, safe='')}" if session else "/conversations"
    return RedirectResponse(page.url(f"/users/{quote(user, safe='')}{where}"), status_code=303)


async def forget_session(page: Page) -> Response:
    """Forget a whole conversation, once the box saying so is ticked."""
    user, session = page.request.path_params["user"], page.request.path_params["session"]
    conversations = f"/users/{quote(user, safe='')}/conversations"
    if page.form.get("confirm", "") != "yes":  # not ticked: nothing deleted
        return RedirectResponse(page.url(f"{conversations}/{quote(session, safe='')}") + "#forget", status_code=303)
    if await memory_admin(page.runtime).forget_session(page.tenant, session) is None:
        raise NotFound(f"No conversation {session!r}.")
    return RedirectResponse(page.url(conversations), status_code=303)


async def forget_user(page: Page) -> Response:
    user = page.request.path_params["user"]
    if page.form.get("confirm", "") != user:
        return _back(page, user, "#forget")  # the name typed did not match: nothing deleted
    await memory_admin(page.runtime).forget(page.tenant, user)
    return RedirectResponse(page.url("/users"), status_code=303)


def _target(page: Page) -> tuple[str, int]:
    user, raw = page.request.path_params["user"], page.request.path_params["item"]
    if not raw.isdigit():
        raise NotFound(f"No memory {raw!r} for user {user!r}.")
    return user, int(raw)


def _back(page: Page, user: str, anchor: str = "") -> Response:
    return RedirectResponse(page.url(f"/users/{quote(user, safe='')}") + anchor, status_code=303)
