"""The admin API under ``/paperclip/v1`` (SPEC §6): one table of paths, each with its methods.

Every call is authenticated by ``KeyRing.admin_grant``: an operator key
(``server.admin_keys``, any tenant, named with ``?tenant=``), a tenant's admin
key (that tenant only), or in passthrough mode a client key (read and delete
its own scope). The tenant comes from the key, never from the body. Errors go
out in OpenAI's envelope, a known path with a wrong method included (405);
calls that need the memory layer answer 503 until it is loaded.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Literal

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute

from ...errors import MethodNotAllowed, PaperclipError
from ...tenancy import Grant, client_key, user_id
from ..encoded_route import EncodedRoute
from ..runtime import Runtime
from . import activity_calls, fragment_calls, memory_calls, user_calls
from .admin_call import AdminCall
from .openapi import document

log = logging.getLogger("paperclip.admin")

PREFIX = "/paperclip/v1"
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]



Handler = Callable[[AdminCall], Awaitable[Response]]
# Who a path answers: "tenant" (a key's tenant), "wide" (an operator may omit ?tenant= to mean
# every tenant), "public" (no key: the OpenAPI document).
Access = Literal["tenant", "wide", "public"]


async def openapi(call: AdminCall) -> Response:
    return JSONResponse(document())


TABLE: dict[str, tuple[dict[str, Handler], Access]] = {
    "/openapi.json": ({"GET": openapi}, "public"),
    "/tenants": ({"GET": activity_calls.list_tenants}, "wide"),
    "/usage": ({"GET": activity_calls.usage}, "wide"),
    "/users": ({"GET": user_calls.list_users}, "tenant"),
    "/users/{user}": ({"DELETE": user_calls.forget_user}, "tenant"),
    "/users/{user}/export": ({"GET": user_calls.export_user}, "tenant"),
    "/users/{user}/profile": ({"GET": user_calls.get_profile}, "tenant"),
    "/users/{user}/sessions": ({"GET": user_calls.user_sessions}, "tenant"),
    "/users/{user}/memories": (
        {"GET": memory_calls.list_memories, "POST": memory_calls.add_memory}, "tenant"
    ),
    "/users/{user}/memories/{item}": (
        {"GET": memory_calls.get_memory, "PATCH": memory_calls.edit_memory,
         "DELETE": memory_calls.delete_memory}, "tenant",
    ),
    "/users/{user}/memories/{item}/history": ({"GET": memory_calls.memory_history}, "tenant"),
    "/users/{user}/fragments": ({"GET": fragment_calls.list_fragments}, "tenant"),
    "/users/{user}/fragments/{fragment}": ({"DELETE": fragment_calls.delete_fragment}, "tenant"),
    "/sessions/{session}": (
        {"GET": activity_calls.get_session, "DELETE": fragment_calls.forget_session}, "tenant"
    ),
    "/traces": ({"GET": activity_calls.list_traces}, "tenant"),
    "/traces/{trace}": ({"GET": activity_calls.get_trace}, "tenant"),
}


def admin_routes(runtime: Runtime) -> list[BaseRoute]:
    return [
        EncodedRoute(PREFIX + path, _endpoint(runtime, handlers, access), methods=METHODS)
        for path, (handlers, access) in TABLE.items()
    ]


def _endpoint(
    runtime: Runtime, handlers: dict[str, Handler], access: Access
) -> Callable[[Request], Awaitable[Response]]:
    """Authenticate, pick the handler by method (405 otherwise), run it; render any error once."""
    if "GET" in handlers:  # HEAD reads as GET does, and answers its headers only
        handlers = {**handlers, "HEAD": handlers["GET"]}
    allow = ", ".join(handlers)

    async def endpoint(request: Request) -> Response:
        try:
            handler = handlers.get(request.method)
            if handler is None:
                raise MethodNotAllowed(f"{request.method} is not allowed here; use {allow}.")
            if "user" in request.path_params:  # one rule with the chat path's: surrounding spaces are not the id
                request.path_params["user"] = user_id(request.path_params["user"])
            return await handler(AdminCall(request, grant(runtime, request, access), runtime))
        except PaperclipError as exc:
            headers = {"allow": allow} if isinstance(exc, MethodNotAllowed) else None
            return JSONResponse(exc.envelope(), status_code=exc.status, headers=headers)
        except Exception:
            log.exception("admin call %s %s failed", request.method, request.url.path)
            failed = PaperclipError("The admin call failed inside Paperclip; see its log.")
            return JSONResponse(failed.envelope(), status_code=failed.status)

    return endpoint


def grant(runtime: Runtime, request: Request, access: Access = "tenant") -> Grant | None:
    if access == "public":
        return None
    key = client_key(request.headers)
    named = request.query_params.get("tenant") or None
    if access == "wide" and named is None and key and runtime.keys.is_operator(key):
        return None
    return runtime.keys.admin_grant(key, named, request.method)
