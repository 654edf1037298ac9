"""One chat call through the pipeline: what came in, and what the upstream replied."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..config.schema import MAX_RECORD_BYTES
from ..content_coding import decode
from ..errors import UndecodableBody
from ..hashing import scrub
from ..message_text import text_of
from ..sse import assistant_text
from ..tenancy import Tenant
from .anthropic_messages import message_text, streamed_text
from .response_items import Answer, answer_of, streamed_answer

Api = Literal["chat", "responses", "messages"]


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
    api: Api = "chat"  # which shape the body has: chat completions, the Responses API or Anthropic's Messages
    # What holds the conversation upstream ("previous_response_id", "conversation"), None
    # when the client sends it whole: only a whole history is compressed.
    provider_state: str | None = None
    offset: int = 0  # the session's conversation messages before this call's (a provider-held chain)
    # The key under which the place reached after this call is kept for the next call of the same
    # provider-held ``conversation`` (``responses.conversation_key``), as a response's id is for a chain.
    chain_key: str | None = None
    # The body's JSON bytes when ``messages`` is its ``messages`` array as parsed (chat completions), else
    # empty: a resent history is told by its bytes (``context.resent_bytes``).
    raw: bytes = b""


@dataclass(frozen=True)
class Reply:
    """The upstream's reply as the client received it whole; ``body`` is empty when it was not kept."""

    status: int = 0
    body: bytes = b""
    streamed: bool = False
    content_encoding: str | None = None
    disconnected: bool = False  # the client left before the end
    max_bytes: int = MAX_RECORD_BYTES  # a body that decodes to more is not recorded (server.max_record_bytes)


def reply_answer(call: ChatCall, reply: Reply) -> Answer | None:
    """What the reply answered; None when a Responses API call failed (nothing of it is recorded).

    A failed chat completion or Message still has its user's turns recorded: its answer is
    empty, not None.
    """
    if call.api == "chat":
        return Answer(None, reply_text(reply))
    if call.api == "messages":
        return Answer(None, messages_reply_text(reply))
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
    """The body of a successful reply, gzip/deflate decoded, else None.

    The upstream is not trusted more than the client: a body kept or decoded
    past ``reply.max_bytes`` (a gzip bomb: 1 MB that inflates to 1 GB) is not
    recorded, and only ``max_bytes + 1`` bytes of it are ever made.
    """
    if reply.status != 200 or not reply.body:
        return None
    try:
        return decode(reply.body, reply.content_encoding, reply.max_bytes)
    except UndecodableBody:  # br and the like are relayed as they came, never read; junk is junk
        return None


def reply_text(reply: Reply) -> str | None:
    """The assistant's text in a successful chat reply (JSON or SSE, gzip/deflate decoded), else None."""
    return _reply_text(reply, assistant_text, lambda whole: text_of(whole["choices"][0]["message"]))


def messages_reply_text(reply: Reply) -> str | None:
    """The assistant's text in a complete Messages API reply (JSON, or SSE up to ``message_stop``), else None."""
    return _reply_text(reply, streamed_text, message_text)


def _reply_text(
    reply: Reply, streamed: Callable[[bytes], str | None], whole: Callable[[Any], str | None]
) -> str | None:
    body = _decoded(reply)
    if body is None:
        return None
    try:
        text = streamed(body) if reply.streamed else whole(json.loads(body))
    except (ValueError, KeyError, IndexError, TypeError):
        return None
    return (scrub(text) or None) if text else None  # an upstream may send lone surrogates too
