"""A fixed-answer OpenAI-compatible upstream for benchmarks, in a process of its own.

    python bench/upstream.py --port 9100

A bare ASGI app (no framework) under uvicorn with uvloop and httptools, so the
upstream costs as little as possible and the same for every client measured
against it. ``POST .../chat/completions`` answers a fixed completion, or with
``"stream": true`` a fixed stream of six SSE events, each written as its own
chunk; ``POST .../responses`` a fixed Responses API response; ``POST
/v1/messages`` a fixed Anthropic Message; ``GET .../models`` lists one model;
anything else is a 404.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import uvicorn

MODEL = "gpt-4o-mini"

COMPLETION = json.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 1700000000,
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Hello! How can I help you today?", "refusal": None},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 9, "completion_tokens": 9, "total_tokens": 18},
        "system_fingerprint": "fp_bench",
    }
).encode()


def _event(delta: dict[str, Any], finish: str | None = None) -> bytes:
    chunk = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": MODEL,
        "system_fingerprint": "fp_bench",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


STREAM = [
    _event({"role": "assistant", "content": ""}),
    *(_event({"content": w}) for w in ("Hello!", " How", " can", " I", " help?")),
    _event({}, "stop"),
    b"data: [DONE]\n\n",
]

RESPONSE = json.dumps(
    {
        "id": "resp_bench",
        "object": "response",
        "created_at": 1700000000,
        "status": "completed",
        "error": None,
        "model": MODEL,
        "output": [
            {
                "id": "msg_bench",
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Hello! How can I help you today?", "annotations": []}],
            }
        ],
        "usage": {"input_tokens": 9, "output_tokens": 9, "total_tokens": 18},
    }
).encode()

MESSAGE = json.dumps(
    {
        "id": "msg_bench",
        "type": "message",
        "role": "assistant",
        "model": "claude-bench",
        "content": [{"type": "text", "text": "Hello! How can I help you today?"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 9, "output_tokens": 9},
    }
).encode()
MODELS = json.dumps({"object": "list", "data": [{"id": MODEL, "object": "model", "created": 1, "owned_by": "bench"}]}).encode()

_JSON = [(b"content-type", b"application/json"), (b"x-request-id", b"req_bench")]
_SSE = [(b"content-type", b"text/event-stream"), (b"x-request-id", b"req_bench")]


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    body = b""
    more = True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    path: str = scope["path"]
    if path.endswith("/chat/completions"):
        if _wants_stream(body):
            await send({"type": "http.response.start", "status": 200, "headers": _SSE})
            for part in STREAM:
                await send({"type": "http.response.body", "body": part, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        await _answer(send, 200, COMPLETION)
    elif path.endswith("/responses"):
        await _answer(send, 200, RESPONSE)
    elif path.endswith("/v1/messages"):
        await _answer(send, 200, MESSAGE)
    elif path.endswith("/models"):
        await _answer(send, 200, MODELS)
    else:
        await _answer(send, 404, b'{"error": {"message": "not found", "type": "invalid_request_error", "param": null, "code": null}}')


def _wants_stream(body: bytes) -> bool:
    if b'"stream"' not in body:
        return False
    try:
        return json.loads(body).get("stream") is True
    except ValueError:
        return False


async def _answer(send: Any, status: int, body: bytes) -> None:
    headers = [*_JSON, (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ssl-certfile", default=None, help="serve https with this certificate ...")
    parser.add_argument("--ssl-keyfile", default=None, help="... and this key")
    args = parser.parse_args()
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        loop="uvloop",
        http="httptools",
        log_level="warning",
        access_log=False,
        backlog=4096,
        ssl_certfile=args.ssl_certfile,
        ssl_keyfile=args.ssl_keyfile,
    )


if __name__ == "__main__":
    main()
