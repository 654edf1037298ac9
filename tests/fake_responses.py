"""The fake upstream's Responses API (``POST /v1/responses``): JSON, or SSE with OpenAI's event names.

It answers "Hello from upstream" as a message, or, when the request offers
tools and holds no ``function_call_output`` yet, calls the first tool. Every
response has a fresh id; ``previous_response_id`` is echoed.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from tests.fake_upstream import stream_response

ANSWER = "Hello from upstream"


def response_object(body: dict[str, Any], output: list[dict[str, Any]], status: str = "completed") -> dict[str, Any]:
    return {
        "id": "resp_" + uuid.uuid4().hex,
        "object": "response",
        "created_at": 1700000000,
        "status": status,
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "metadata": body.get("metadata") or {},
        "model": body.get("model", "gpt-4o-mini"),
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": body.get("previous_response_id"),
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": body.get("tools") or [],
        "top_p": 1.0,
        "usage": {
            "input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15,
        },
    }


def message_item(text: str, status: str = "completed") -> dict[str, Any]:
    return {
        "id": "msg_" + uuid.uuid4().hex, "type": "message", "status": status, "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def output_for(body: dict[str, Any], text: str = ANSWER) -> list[dict[str, Any]]:
    items = body.get("input") if isinstance(body.get("input"), list) else []
    answered = any(isinstance(i, dict) and i.get("type") == "function_call_output" for i in items)
    tools = body.get("tools") or []
    if tools and not answered:
        name = tools[0].get("name", "tool")
        return [{"id": "fc_" + uuid.uuid4().hex, "type": "function_call", "status": "completed",
                 "call_id": "call_" + uuid.uuid4().hex[:12], "name": name, "arguments": '{"city":"Paris"}'}]
    return [message_item(text)]


def sse_events(body: dict[str, Any], text: str = ANSWER) -> list[bytes]:
    """A text answer streamed as OpenAI streams it, word by word."""
    done = response_object(body, [message_item(text)])
    item = message_item("", "in_progress")
    item["id"] = done["output"][0]["id"]
    item["content"] = []
    start = {**done, "status": "in_progress", "output": [], "usage": None}
    where = {"item_id": item["id"], "output_index": 0, "content_index": 0}
    part = {"type": "output_text", "text": "", "annotations": []}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": start},
        {"type": "response.in_progress", "response": start},
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {"type": "response.content_part.added", **where, "part": part},
    ]
    words = text.split(" ")
    events += [{"type": "response.output_text.delta", **where, "delta": (" " if i else "") + w, "logprobs": []}
               for i, w in enumerate(words)]
    events += [
        {"type": "response.output_text.done", **where, "text": text, "logprobs": []},
        {"type": "response.content_part.done", **where, "part": {**part, "text": text}},
        {"type": "response.output_item.done", "output_index": 0, "item": done["output"][0]},
        {"type": "response.completed", "response": done},
    ]
    return [f"event: {e['type']}\ndata: {json.dumps({**e, 'sequence_number': n})}\n\n".encode()
            for n, e in enumerate(events)]


async def default_responses(request: Request, body: dict[str, Any]) -> Response:
    headers = {"x-request-id": "req_fake_resp", "x-ratelimit-remaining-requests": "99"}
    if body.get("stream"):
        return stream_response(sse_events(body), headers=headers)
    return JSONResponse(response_object(body, output_for(body)), headers=headers)
