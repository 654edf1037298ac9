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
import gzip
import json
import re
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

Handler = Callable[[Request, dict[str, Any]], Awaitable[Response]]


@dataclass
class Seen:
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes

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


def fake_summary(messages: list[dict[str, Any]]) -> str:
    """A deterministic 'summary': the first eight words of every transcript line."""
    source = str(messages[-1].get("content", ""))
    lines = [ln for ln in source.splitlines() if ln.strip()]
    keep = [" ".join(ln.split()[:8]) for ln in lines]
    return "Summary: " + " / ".join(keep)


@dataclass
class FakeUpstream:
    requests: list[Seen] = field(default_factory=list)
    chat: Handler | None = None
    compression: Handler | None = None
    routes: dict[str, Handler] = field(default_factory=dict)
    disconnects: list[float] = field(default_factory=list)
    compression_calls: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def reset(self) -> None:
        with self.lock:
            self.requests.clear()
            self.disconnects.clear()
            self.chat = None
            self.compression = None
            self.routes.clear()
            self.compression_calls = 0

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
            )
            with self.lock:
                self.requests.append(seen)
            parsed: dict[str, Any] = {}
            if body and request.headers.get("content-type", "").startswith("application/json"):
                parsed = json.loads(body)
            handler = self.routes.get(request.url.path)
            if handler is not None:
                return await handler(request, parsed)
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
            routes=[Route("/{path:path}", any_path, methods=["GET", "POST", "PUT", "PATCH", "DELETE"])]
        )

    def watch_disconnect(self, request: Request) -> Callable[[], Awaitable[None]]:
        async def watcher() -> None:
            while True:
                if await request.is_disconnected():
                    self.disconnects.append(time.monotonic())
                    return
                await asyncio.sleep(0.02)

        return watcher


COMPRESSION_MARK = re.compile(r"paperclip:(summarize|merge|extract)")


def is_compression(seen: Seen) -> bool:
    return bool(COMPRESSION_MARK.search(seen.body[:4000].decode("utf-8", "replace")))


async def default_chat(request: Request, body: dict[str, Any]) -> Response:
    headers = {"x-request-id": "req_fake_123", "x-ratelimit-remaining-requests": "99"}
    if body.get("stream"):
        words = ["Hello", " from", " upstream"]
        events = [chunk({"role": "assistant", "content": ""})]
        events += [chunk({"content": w}) for w in words]
        events.append(chunk({}, finish="stop"))
        return stream_response(sse(events), headers=headers)
    return JSONResponse(completion(model=body.get("model", "gpt-4o-mini")), headers=headers)


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
