"""The outermost layer: every answer the proxy makes itself is in OpenAI's envelope (Anthropic's on its paths).

Two kinds of answer escape the handlers: Starlette's own (a path no route
matches, such as one holding ``%0A``; a method no route takes), rendered by
``http_error``; and an exception nothing caught, which uvicorn would answer
with a plain-text 500 — or, once a response has started, by closing the
socket without ``Connection: close``. ``Guard`` answers the first case with a
500 in the envelope and logs it; a response already under way cannot be
repaired, so it is ended by closing the connection, which is what tells a
client that the body is incomplete.
"""

from __future__ import annotations

import logging
import re

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import (
    ANTHROPIC_ERRORS,
    OPENAI_ERRORS,
    ClientError,
    ErrorShape,
    NotFound,
    PaperclipError,
    envelope,
)
from ..upstream.headers import header_map, speaks_anthropic
from .relay import send_error

log = logging.getLogger("paperclip")

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class Guard:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if _CONTROL.search(scope["path"]):
            # No API has such a path, and Starlette's ``$`` matches before a final "\n",
            # so "/v1/chat/completions%0A" would otherwise be served as the chat path.
            await send_error(send, NotFound("Unknown path: it holds a control character."))
            return
        state = {"started": False, "finished": False}

        async def watched(message: Message) -> None:
            if message["type"] == "http.response.start":
                state["started"] = True
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                state["finished"] = True
            await send(message)

        try:
            await self.app(scope, receive, watched)
        except Exception:
            log.exception("unhandled error on %s %s", scope.get("method"), scope.get("path"))
            if state["finished"]:
                return
            if state["started"]:
                raise
            failed = PaperclipError("Paperclip failed to handle this request; see its log.")
            await send_error(send, failed, shape=shape_for(scope))


def shape_for(scope: Scope) -> ErrorShape:
    return ANTHROPIC_ERRORS if speaks_anthropic(scope["path"], header_map(scope["headers"])) else OPENAI_ERRORS


async def http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own 404 and 405 (and any HTTPException), in OpenAI's envelope."""
    assert isinstance(exc, HTTPException)
    kind = ClientError.type if exc.status_code < 500 else PaperclipError.type
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code)
    message = "Unknown path." if exc.status_code == 404 else str(exc.detail)
    if shape_for(request.scope) is ANTHROPIC_ERRORS:
        failed = PaperclipError(message)
        failed.status = exc.status_code
        return JSONResponse(ANTHROPIC_ERRORS.body(failed), status_code=exc.status_code, headers=exc.headers)
    return JSONResponse(envelope(message, kind, None, code), status_code=exc.status_code, headers=exc.headers)
