"""A fake OpenAI-compatible upstream: a real Starlette app, served by uvicorn on loopback.

It records every request it receives and answers like OpenAI does. Tests
replace behaviour by assigning ``fake.chat`` (an async function from the
parsed request to a Starlette response) or ``fake.routes[path]``. As a
compression model it answers deterministically: a request whose first
message carries the summarisation/merge/extraction prompt gets a summary made
of the first words of each source line, so summaries are shorter than their
source and keep the numbers of the first words.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
import re
import struct
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from proxy.eval.fake import fake_summary

Handler = Callable[[Request, dict[str, Any]], Awaitable[Response]]


@dataclass
class Seen:
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes
    peer: tuple[str, int] | None = None  # the client's address: one per upstream connection

    def json(self) -> Any:
        return json.loads(self.body)


def completion(text: str = "Hello from upstream", model: str = "gpt-4o-mini", **extra: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1700000000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        **extra,
    }


def chunk(delta: dict[str, Any], index: int = 0, finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "gpt-4o-mini",
        "choices": [{"index": index, "delta": delta, "finish_reason": finish, "logprobs": None}],
    }


def sse(events: list[dict[str, Any]], done: bool = True) -> list[bytes]:
    out = [f"data: {json.dumps(e)}\n\n".encode() for e in events]
    if done:
        out.append(b"data: [DONE]\n\n")
    return out


def stream_response(parts: list[bytes], delay: float = 0.0, hold_open: float = 0.0, **kw: Any) -> Response:
    async def gen() -> AsyncIterator[bytes]:
        for p in parts:
            yield p
            if delay:
                await asyncio.sleep(delay)
        if hold_open:
            await asyncio.sleep(hold_open)

    return StreamingResponse(gen(), media_type="text/event-stream", **kw)




@dataclass
class FakeUpstream:
    requests: list[Seen] = field(default_factory=list)
    chat: Handler | None = None
    compression: Handler | None = None
    routes: dict[str, Handler] = field(default_factory=dict)
    disconnects: list[float] = field(default_factory=list)
    writes: list[float] = field(default_factory=list)
    compression_calls: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def reset(self) -> None:
        with self.lock:
            self.requests.clear()
            self.disconnects.clear()
            self.writes.clear()
            self.chat = None
            self.compression = None
            self.routes.clear()
            self.compression_calls = 0

    def messages_requests(self) -> list[Seen]:
        """Anthropic's Messages API calls, not the compression model's nor ``count_tokens``."""
        return [r for r in self.requests if r.path == "/v1/messages" and not is_compression(r)]

    def responses_requests(self) -> list[Seen]:
        return [r for r in self.requests if r.path.endswith("/responses")]

    def chat_requests(self) -> list[Seen]:
        return [
            r for r in self.requests if r.path.endswith("/chat/completions") and not is_compression(r)
        ]

    def app(self) -> Starlette:
        async def any_path(request: Request) -> Response:
            body = await request.body()
            seen = Seen(
                request.method,
                request.url.path,
                request.url.query,
                {k.lower(): v for k, v in request.headers.items()},
                body,
                (request.client.host, request.client.port) if request.client else None,
            )
            with self.lock:
                self.requests.append(seen)
            parsed: dict[str, Any] = {}
            if body and request.headers.get("content-type", "").startswith("application/json"):
                parsed = json.loads(body)
            handler = self.routes.get(request.url.path)
            if handler is not None:
                return await handler(request, parsed)
            if request.url.path.startswith("/openai/") and not azure_authorized(request):
                return error_json(401, "Access denied due to invalid subscription key.", "invalid_request_error", "401")
            if request.url.path.startswith("/v1/messages"):
                from tests.fake_anthropic import (  # it builds on this module
                    default_messages,
                    summary,
                )

                if is_compression(seen):  # compression.api: messages
                    with self.lock:
                        self.compression_calls += 1
                    return summary(parsed)
                return await default_messages(request, parsed)
            if request.url.path.endswith("/responses"):
                from tests.fake_responses import default_responses  # it builds on this module

                return await default_responses(request, parsed)
            if request.url.path.endswith("/chat/completions"):
                if is_compression(seen):
                    with self.lock:
                        self.compression_calls += 1
                    if self.compression is not None:
                        return await self.compression(request, parsed)
                    return JSONResponse(completion(fake_summary(parsed["messages"])))
                if self.chat is not None:
                    return await self.chat(request, parsed)
                return await default_chat(request, parsed)
            return await default_other(request, body)

        return Starlette(
            routes=[Route("/{path:path}", any_path, methods=["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"])]
        )

    def watch_disconnect(self, request: Request) -> Callable[[], Awaitable[None]]:
        async def watcher() -> None:
            while True:
                if await request.is_disconnected():
                    self.disconnects.append(time.monotonic())
                    return
                await asyncio.sleep(0.02)

        return watcher


def azure_authorized(request: Request) -> bool:
    """Azure OpenAI's resource endpoint: the key in ``api-key`` and an ``api-version`` on every call."""
    return bool(request.headers.get("api-key")) and "api-version" in request.query_params


# The prompts in prompts/ wrap their material in these tags.
COMPRESSION_MARK = re.compile(r"<(transcript|summaries|conversation)>")


def is_compression(seen: Seen) -> bool:
    return bool(COMPRESSION_MARK.search(seen.body.decode("utf-8", "replace")))


async def default_chat(request: Request, body: dict[str, Any]) -> Response:
    headers = {"x-request-id": "req_fake_123", "x-ratelimit-remaining-requests": "99"}
    if body.get("stream"):
        words = ["Hello", " from", " upstream"]
        events = [chunk({"role": "assistant", "content": ""})]
        events += [chunk({"content": w}) for w in words]
        events.append(chunk({}, finish="stop"))
        return stream_response(sse(events), headers=headers)
    model = body.get("model")  # echoed only when it is a name: a fuzzed NaN must not make the fake itself fail
    return JSONResponse(completion(model=model if isinstance(model, str) else "gpt-4o-mini"), headers=headers)


async def default_other(request: Request, body: bytes) -> Response:
    path = request.url.path
    if path.endswith("/models"):
        return JSONResponse(
            {"object": "list", "data": [{"id": "gpt-4o-mini", "object": "model", "created": 1, "owned_by": "fake"}]}
        )
    return JSONResponse({"path": path, "method": request.method, "bytes": len(body)})


def gzip_json(payload: Any, **headers: str) -> Response:
    data = gzip.compress(json.dumps(payload).encode())
    return Response(data, media_type="application/json", headers={"content-encoding": "gzip", **headers})


class Scripted(Response):
    """An ASGI response played step by step that notices its client going away.

    Every write is timestamped in ``fake.writes``; a disconnect of the client
    (the proxy) is timestamped in ``fake.disconnects`` and stops the script at
    once, whatever it was doing (waiting before the first byte, between chunks,
    or holding the socket open after the last one). ``abort_after`` > 0 drops
    the connection without finishing the body after that many parts, as a
    crashing upstream does.
    """

    def __init__(
        self,
        fake: FakeUpstream,
        parts: list[bytes],
        *,
        status: int = 200,
        headers: dict[str, str] | None = None,
        media_type: str = "text/event-stream",
        first_byte_delay: float = 0.0,
        delay: float = 0.0,
        hold_open: float = 0.0,
        abort_after: int = 0,
    ) -> None:  # Response.__init__ is not called: this response writes its own messages
        self.fake = fake
        self.parts = parts
        self.status = status
        self.extra_headers = {"content-type": media_type, **(headers or {})}
        self.first_byte_delay = first_byte_delay
        self.delay = delay
        self.hold_open = hold_open
        self.abort_after = abort_after

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        async with anyio.create_task_group() as tg:

            async def watch() -> None:
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        self.fake.disconnects.append(time.monotonic())
                        tg.cancel_scope.cancel()
                        return

            tg.start_soon(watch)
            await self._play(send)
            tg.cancel_scope.cancel()

    async def _play(self, send: Any) -> None:
        if self.first_byte_delay:
            await asyncio.sleep(self.first_byte_delay)
        raw = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in self.extra_headers.items()]
        await send({"type": "http.response.start", "status": self.status, "headers": raw})
        for i, part in enumerate(self.parts):
            if self.abort_after and i == self.abort_after:
                raise UpstreamCrash("the fake upstream drops the connection mid-body")
            await send({"type": "http.response.body", "body": part, "more_body": True})
            self.fake.writes.append(time.monotonic())
            if self.delay and i < len(self.parts) - 1:
                await asyncio.sleep(self.delay)
        if self.hold_open:
            await asyncio.sleep(self.hold_open)
        await send({"type": "http.response.body", "body": b"", "more_body": False})


class UpstreamCrash(Exception):
    """Raised inside the fake upstream to make uvicorn drop a response half-way."""


def error_json(status: int, message: str, type: str, code: str | None = None, **headers: str) -> Response:
    """An upstream error as OpenAI sends it: the envelope plus its request id and rate headers."""
    body = {"error": {"message": message, "type": type, "param": None, "code": code}}
    return JSONResponse(body, status_code=status, headers=headers)


def b64_floats(values: list[float]) -> str:
    """Floats as OpenAI's ``encoding_format: base64`` sends them (little-endian float32)."""
    return base64.b64encode(struct.pack(f"<{len(values)}f", *values)).decode()
