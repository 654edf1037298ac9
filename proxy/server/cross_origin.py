"""Browser apps on other origins: the API paths answer CORS as OpenAI's and Anthropic's APIs do.

A browser app that calls the API itself (the ``openai`` SDK with
``dangerouslyAllowBrowser``, Anthropic's with
``anthropic-dangerous-direct-browser-access``) sends a preflight ``OPTIONS``
first and reads the reply only if it names its origin. The API paths
(``/v1/*``, ``/chat/completions``, ``/responses``, ``/messages``, ``/mcp``,
Azure's ``/openai/*``) answer it from ``server.cors_origins``, through
Starlette's ``CORSMiddleware``: ``*`` (the default, as the vendors' APIs) or
the origins listed, never with credentials, so a browser sends no cookie and
a page learns nothing without a key of its own. The admin API, the inspector
(``/paperclip/*``), ``/metrics`` and the health checks are never opened to
another origin: the inspector signs in with a cookie, and ``/metrics`` may be
open to anyone who can reach the port, not to every page its operator visits.
"""

from __future__ import annotations

from collections.abc import Sequence

from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

API_PREFIXES = ("/v1/", "/openai/")
API_PATHS = frozenset({"/chat/completions", "/responses", "/messages", "/mcp"})


def is_api_path(path: str) -> bool:
    return path.startswith(API_PREFIXES) or path in API_PATHS


class CrossOrigin:
    """``app`` with CORS on its API paths for ``origins`` (none: no CORS anywhere)."""

    def __init__(self, app: ASGIApp, origins: Sequence[str]) -> None:
        self.app = app
        self.cors: ASGIApp | None = None
        if origins:
            self.cors = CORSMiddleware(
                app, allow_origins=list(origins), allow_methods=["*"], allow_headers=["*"], expose_headers=["*"],
                allow_credentials=False, max_age=600,
            )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Only a browser sends Origin: an SDK's request skips the middleware (and its parse of every header).
        if (self.cors is not None and scope["type"] == "http" and is_api_path(scope["path"])
                and any(name == b"origin" for name, _ in scope["headers"])):
            await self.cors(scope, receive, send)
        else:
            await self.app(scope, receive, send)
