"""One chat call through the pipeline: what came in, and what the upstream replied."""

from __future__ import annotations

import json
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..hashing import scrub
from ..memory.recall.query import text_of
from ..sse import assistant_text
from ..tenancy import Tenant
from .response_items import Answer, answer_of, streamed_answer

Api = Literal["chat", "responses"]


@dataclass
class ChatCall:
    tenant: Tenant
    user: str
    session: str
    trace_id: str
    body: dict[str, Any]
    messages: list[dict[str, Any]]
    model: str | None
    headers: Mapping[str, str]
    received_at: float = field(default_factory=time.time)
    api: Api = "chat"  # which shape the body has: chat completions or the Responses API
    # What holds the conversation upstream ("previous_response_id", "conversation"), None
    # when the client sends it whole: only a whole history is compressed.
    provider_state: str | None = None
    offset: int = 0  # the session's conversation messages before this call's (a provider-held chain)


@dataclass(frozen=True)
class Reply:
    """The upstream's reply as far as it was relayed: ``body`` is what was kept of it (maybe cut)."""

    status: int = 0
    body: bytes = b""
    streamed: bool = False
    content_encoding: str | None = None
    disconnected: bool = False  # the client left before the end


def reply_answer(call: ChatCall, reply: Reply) -> Answer | None:
    """What the reply answered; None when a Responses API call failed (nothing of it is recorded).

    A failed chat completion still has its user's turns recorded: its answer is empty, not None.
    """
    if call.api == "chat":
        return Answer(None, reply_text(reply))
    body = _decoded(reply)
    if body is None:
        return None
    if reply.streamed:
        return streamed_answer(body)
    try:
        return answer_of(json.loads(body))
    except ValueError:
        return None


def _decoded(reply: Reply) -> bytes | None:
    """The body of a successful reply, gzip/deflate decoded, else None."""
    if reply.status != 200 or not reply.body:
        return None
    if reply.content_encoding in ("gzip", "deflate"):
        try:
            return zlib.decompressobj(47).decompress(reply.body)
        except zlib.error:
            return None
    return None if reply.content_encoding else reply.body


def reply_text(reply: Reply) -> str | None:
    """The assistant's text in a successful chat reply (JSON or SSE, gzip/deflate decoded), else None."""
    body = _decoded(reply)
    if body is None:
        return None
    if reply.streamed:
        text = assistant_text(body)
        return scrub(text) if text else text
    try:
        message = json.loads(body)["choices"][0]["message"]
    except (ValueError, KeyError, IndexError, TypeError):
        return None
    return scrub(text_of(message)) or None  # an upstream may send lone surrogates too
