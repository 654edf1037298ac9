"""The inspector's guard and sign-in: the session every page passes, form parsing and rendering.

Every page acts with the signed-in key's grant (``KeyRing.admin_grant``), as
the admin API does: viewing is a GET, an edit a PATCH, a delete a DELETE, so a
passthrough client key may look and delete but not edit. Every POST carries
the session's CSRF token; templates autoescape everything (memories are user
text), and every answer carries ``PAGE_HEADERS``: no script runs, no other
site frames a page, nothing is sniffed into another type. Paths are matched
as sent (``EncodedRoute``), so a user or session id holding "/" has its page.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute

from ...errors import BadRequest, CsrfRefused, PaperclipError
from ...tenancy import Grant
from ..encoded_route import EncodedRoute
from ..runtime import Runtime
from .signin import (
    COOKIE,
    MAX_SESSIONS,
    WINDOW_S,
    Sessions,
    SignInLimits,
    UiSession,
    cookie_header,
    csrf_ok,
)

log = logging.getLogger("paperclip.inspector")

PREFIX = "/paperclip/ui"
MAX_FORM_BYTES = 64 * 1024
# The pages have no script; their styles are inline (a <style> block, bar widths).
PAGE_HEADERS = {
    "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; "
                               "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
}



@dataclass
class Page:
    """One signed-in request: who, on which tenant (``?tenant=``), and its form if it is a POST."""

    request: Request
    runtime: Runtime
    session: UiSession
    grant: Grant
    form: dict[str, str]

    @property
    def tenant(self) -> str:
        return self.grant.tenant.id

    def url(self, path: str, **params: Any) -> str:
        """A link inside the inspector, keeping the tenant an operator picked."""
        query = {k: v for k, v in params.items() if v not in (None, "")}
        if self.grant.operator:
            query = {"tenant": self.tenant, **query}
        return PREFIX + path + ("?" + urlencode(query) if query else "")

    def render(self, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        return render(template, status_code, page=self, csrf=self.session.csrf, **context)


Handler = Callable[[Page], Awaitable[Response]]
_env = Environment(
    loader=PackageLoader("proxy.server.inspector", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
)
_env.filters["part"] = lambda text: quote(str(text), safe="")  # one path segment
_env.filters["when"] = lambda ts: (
    "-" if ts is None else dt.datetime.fromtimestamp(float(ts), dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
)


def render(template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    return HTMLResponse(_env.get_template(template).render(**context), status_code=status_code)


def inspector_routes(runtime: Runtime, handlers: dict[str, tuple[str, Handler]]) -> list[BaseRoute]:
    """``handlers``: path → (verb, handler). A verb of GET is a page; PATCH or DELETE, a form
    posted to that path, checked as that admin call would be. Sign-in and sign-out are added here."""
    sessions = Sessions()
    pages: list[tuple[str, Endpoint, list[str]]] = [
        ("", _home(runtime, sessions), ["GET"]),
        ("/", _home(runtime, sessions), ["GET"]),
        ("/login", _login(runtime, sessions, SignInLimits()), ["GET", "POST"]),
        ("/logout", _logout(sessions), ["POST"]),
        ("/tenants", _tenants(runtime, sessions), ["GET"]),
    ]
    for path, (verb, handler) in handlers.items():
        pages.append((path, _guarded(runtime, sessions, verb, handler), ["GET" if verb == "GET" else "POST"]))
    return [EncodedRoute(PREFIX + path, _secured(endpoint), methods=methods) for path, endpoint, methods in pages]


Endpoint = Callable[[Request], Awaitable[Response]]


def _secured(endpoint: Endpoint) -> Endpoint:
    async def secured(request: Request) -> Response:
        response = await endpoint(request)
        response.headers.update(PAGE_HEADERS)
        return response

    return secured


def _guarded(
    runtime: Runtime, sessions: Sessions, verb: str, handler: Handler
) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        session = sessions.get(request.cookies.get(COOKIE))
        if session is None:
            return RedirectResponse(PREFIX + "/login", status_code=303)
        try:
            form = await read_form(request) if verb != "GET" else {}
            if verb != "GET" and not csrf_ok(session, form.get("csrf")):
                raise CsrfRefused("This form has expired or did not come from the inspector; reload the page.")
            named = request.query_params.get("tenant") or None
            grant = runtime.keys.admin_grant(session.key, named, verb)
            return await handler(Page(request, runtime, session, grant, form))
        except BadRequest as exc:
            if exc.param == "tenant":
                return RedirectResponse(PREFIX + "/tenants", status_code=303)
            return render("error.html", exc.status, error=exc)
        except PaperclipError as exc:
            return render("error.html", exc.status, error=exc)
        except Exception:
            log.exception("inspector page %s failed", request.url.path)
            return render("error.html", 500, error=PaperclipError("This page failed; see the log."))

    return endpoint


def _home(runtime: Runtime, sessions: Sessions) -> Callable[[Request], Awaitable[Response]]:
    async def home(request: Request) -> Response:
        session = sessions.get(request.cookies.get(COOKIE))
        if session is None:
            return RedirectResponse(PREFIX + "/login", status_code=303)
        wide = runtime.keys.is_operator(session.key) and len(runtime.keys.tenant_names()) != 1
        return RedirectResponse(PREFIX + ("/tenants" if wide else "/users"), status_code=303)

    return home


def _tenants(runtime: Runtime, sessions: Sessions) -> Callable[[Request], Awaitable[Response]]:
    """The operator's first page: every tenant, configured or a passthrough scope with data."""

    async def tenants(request: Request) -> Response:
        session = sessions.get(request.cookies.get(COOKIE))
        if session is None or not runtime.keys.is_operator(session.key):
            return RedirectResponse(PREFIX, status_code=303)
        configured = runtime.keys.tenant_names()
        store = runtime.store()
        stored = await store.listings.tenants() if store is not None else []
        rows = [{"id": n, "kind": "tenant" if n in configured else "passthrough"}
                for n in sorted({*configured, *stored})]
        return render("tenants.html", tenants=rows, csrf=session.csrf, page=None)

    return tenants


def _login(runtime: Runtime, sessions: Sessions, limits: SignInLimits) -> Endpoint:
    async def login(request: Request) -> Response:
        if request.method == "GET":
            return render("login.html")
        address = request.client.host if request.client else ""
        if not limits.allowed(address):
            refused = render("login.html", 429, error="Too many sign-in attempts from this address; wait a minute.")
            refused.headers["retry-after"] = str(int(WINDOW_S))
            return refused
        key = (await read_form(request)).get("key", "").strip()
        try:
            if not runtime.keys.is_operator(key):
                runtime.keys.admin_grant(key, None, "GET")
        except PaperclipError:
            limits.failed(address)
            return render("login.html", 401, error="That key is not an admin key of this proxy.")
        sid = sessions.open(key)
        if sid is None:
            log.warning("inspector sign-in refused: %d sessions are open", MAX_SESSIONS)
            return render("login.html", 503, error="The inspector has as many sessions open as it keeps; "
                                                   "sign in again once one has expired or signed out.")
        response = RedirectResponse(PREFIX, status_code=303)
        response.headers["set-cookie"] = cookie_header(sid, request.url.scheme == "https")
        return response

    return login


def _logout(sessions: Sessions) -> Callable[[Request], Awaitable[Response]]:
    async def logout(request: Request) -> Response:
        sid = request.cookies.get(COOKIE)
        session = sessions.get(sid)
        if session is not None and csrf_ok(session, (await read_form(request)).get("csrf")):
            sessions.close(sid)
        response = RedirectResponse(PREFIX + "/login", status_code=303)
        response.headers["set-cookie"] = cookie_header("", request.url.scheme == "https", max_age=0)
        return response

    return logout


async def read_form(request: Request) -> dict[str, str]:
    """An urlencoded form (the inspector's forms are no more), bounded in size."""
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise BadRequest("The form is too large.")
    return dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
