"""The fake upstream's Anthropic Messages API (``POST /v1/messages``): JSON, or SSE with Anthropic's events.

It answers "Hello from upstream" as a text block, or, when the request offers
tools and its last message holds no ``tool_result`` yet, calls the first tool
(a ``tool_use`` block). ``count_tokens`` answers a count. Every reply echoes
the request's ``anthropic-version`` as a response header, so tests can see
it went through.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from proxy.eval.fake import fake_summary
from tests.fake_upstream import stream_response

ANSWER = "Hello from upstream"
VERSION = "2023-06-01"


def message(body: dict[str, Any], content: list[dict[str, Any]], stop: str = "end_turn") -> dict[str, Any]:
    return {
        "id": "msg_" + uuid.uuid4().hex[:24],
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "claude-sonnet-4-5"),
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": 0},
    }


def content_for(body: dict[str, Any], text: str = ANSWER) -> tuple[list[dict[str, Any]], str]:
    """A tool call when tools are offered and not yet answered, else ``text``."""
    messages = body.get("messages") or []
    last = messages[-1].get("content") if messages and isinstance(messages[-1], dict) else None
    answered = isinstance(last, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in last)
    tools = body.get("tools") or []
    if tools and not answered:
        call = {"type": "tool_use", "id": "toolu_" + uuid.uuid4().hex[:20], "name": tools[0].get("name", "tool"),
                "input": {"city": "Paris"}}
        return [call], "tool_use"
    return [{"type": "text", "text": text}], "end_turn"


def event(kind: str, **data: Any) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()


def sse_events(body: dict[str, Any], text: str = ANSWER, *, stop: bool = True) -> list[bytes]:
    """A reply streamed as Anthropic streams it: message_start, one block's deltas, message_stop."""
    content, reason = content_for(body, text)
    done = message(body, content, reason)
    # As Anthropic streams: the input counted at the start with a placeholder output, the output at the end.
    start = {**done, "content": [], "stop_reason": None, "usage": {**done["usage"], "output_tokens": 1}}
    out = [event("message_start", message=start), event("ping")]
    block = content[0]
    if block["type"] == "text":
        out.append(event("content_block_start", index=0, content_block={"type": "text", "text": ""}))
        for word in _words(block["text"]):
            out.append(event("content_block_delta", index=0, delta={"type": "text_delta", "text": word}))
    else:
        out.append(event("content_block_start", index=0, content_block={**block, "input": {}}))
        out.append(event("content_block_delta", index=0,
                         delta={"type": "input_json_delta", "partial_json": json.dumps(block["input"])}))
    out.append(event("content_block_stop", index=0))
    out.append(event("message_delta", delta={"stop_reason": reason, "stop_sequence": None},
                     usage={"output_tokens": 5}))
    if stop:
        out.append(event("message_stop"))
    return out


def _words(text: str) -> list[str]:
    words = text.split(" ")
    return [w if i == 0 else " " + w for i, w in enumerate(words)]


def anthropic_error(status: int, kind: str, message: str) -> Response:
    return JSONResponse({"type": "error", "error": {"type": kind, "message": message}}, status_code=status,
                        headers={"request-id": "req_fake_anthropic"})


async def default_messages(request: Request, body: dict[str, Any]) -> Response:
    headers = {"request-id": "req_fake_anthropic", "anthropic-version": request.headers.get("anthropic-version", "")}
    if not request.headers.get("x-api-key") and not request.headers.get("authorization"):
        return anthropic_error(401, "authentication_error", "x-api-key header is required")
    if request.url.path.endswith("/count_tokens"):
        return JSONResponse({"input_tokens": 42}, headers=headers)
    if body.get("stream"):
        return stream_response(sse_events(body), headers=headers)
    content, reason = content_for(body)
    return JSONResponse(message(body, content, reason), headers=headers)


def summary(body: dict[str, Any]) -> Response:
    """The compression model behind Anthropic's API: the fake summary, as a Message."""
    return JSONResponse(message(body, [{"type": "text", "text": fake_summary(body["messages"])}]))
