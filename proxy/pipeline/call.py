"""One chat call through the pipeline: what came in, and what the upstream replied."""

from __future__ import annotations

import json
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..hashing import scrub
from ..memory.query import text_of
from ..sse import assistant_text
from ..tenancy import Tenant


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


@dataclass(frozen=True)
class Reply:
    """The upstream's reply as far as it was relayed: ``body`` is what was kept of it (maybe cut)."""

    status: int = 0
    body: bytes = b""
    streamed: bool = False
    content_encoding: str | None = None
    disconnected: bool = False  # the client left before the end


def reply_text(reply: Reply) -> str | None:
    """The assistant's text in a successful reply (JSON or SSE, gzip/deflate decoded), else None."""
    if reply.status != 200 or not reply.body:
        return None
    body = reply.body
    if reply.content_encoding in ("gzip", "deflate"):
        try:
            body = zlib.decompressobj(47).decompress(body)
        except zlib.error:
            return None
    elif reply.content_encoding:
        return None
    if reply.streamed:
        text = assistant_text(body)
        return scrub(text) if text else text
    try:
        message = json.loads(body)["choices"][0]["message"]
    except (ValueError, KeyError, IndexError, TypeError):
        return None
    return scrub(text_of(message)) or None  # an upstream may send lone surrogates too
