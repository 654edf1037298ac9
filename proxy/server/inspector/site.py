"""The inspector's table of pages and forms, mounted by the app factory under ``/paperclip/ui``."""

from __future__ import annotations

from starlette.routing import BaseRoute

from ..runtime import Runtime
from . import actions, pages
from .page_guard import inspector_routes


def inspector_site(runtime: Runtime) -> list[BaseRoute]:
    return inspector_routes(runtime, {
        "/users": ("GET", pages.users_page),
        "/users/{user}": ("GET", pages.user_page),
        "/users/{user}/export": ("GET", pages.export_page),
        "/users/{user}/forget": ("DELETE", actions.forget_user),
        "/users/{user}/memories/{item}/edit": ("PATCH", actions.edit_memory),
        "/users/{user}/memories/{item}/delete": ("DELETE", actions.delete_memory),
        "/users/{user}/conversations": ("GET", pages.conversations_page),
        "/users/{user}/conversations/{session}": ("GET", pages.conversation_page),
        "/users/{user}/fragments/{fragment}/delete": ("DELETE", actions.delete_fragment),
        "/users/{user}/conversations/{session}/forget": ("DELETE", actions.forget_session),
        "/sessions/{session}": ("GET", pages.session_page),
        "/traces": ("GET", pages.traces_page),
        "/traces/{trace}": ("GET", pages.trace_page),
    })
