"""Anthropic's Messages API's shape of a call: its messages ↔ the pipeline's, and its replies read back.

Pure: no I/O. A ``POST /v1/messages`` body is another shape of the chat
pipeline's input, so each message becomes one chat-shaped message and the
pipeline's rules (watermark, recall, injection, recording) apply unchanged:

- ``system`` (a string or text blocks) is a leading system message, so it is
  counted; it goes out as the client sent it;
- an assistant message's ``tool_use`` blocks are its ``tool_calls``, so the
  planner never cuts between a call and the user message holding its
  ``tool_result``; that user message has the role ``tool`` (its results are
  not the user's words: never indexed, never the query); text or images the
  user sent beside the results (typed during a tool loop) are one more
  message, ``user`` and bound to the results, both written back as the one
  message they came in;
- every assistant message is bound to the message before it
  (``BINDS_PREVIOUS``): the API wants the forwarded window to begin with a
  user turn, so a range may end only before a user message that holds no
  results, or before the next call of a tool loop, where the window is led
  by the loop's question (``planner.anchor``);
- ``thinking`` / ``redacted_thinking``, images and documents stay parts of
  their message: counted (estimated), carried with their turn, never read as
  text.

``rebuild`` maps the pipeline's answer back: a message it did not touch is
the client's own, unchanged; system messages it added (the summary chain,
``system_tail``'s block) become text blocks after the client's ``system``;
the memory block it put in the latest user turn moves, as a text block, into
the latest ``user`` message, after its leading ``tool_result`` blocks and
after the client's last ``cache_control`` breakpoint, so the cached prefix
the client marked stays byte-identical.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .. import json_bytes
from ..context.planner import BINDS_PREVIOUS
from ..memory.recall.query import latest_user_index
from ..sse import json_events
from .shaped_body import ShapedBody

# The event that ends a complete stream; a stream without it was cut.
STOP_EVENT = "message_stop"


def as_messages(body: Mapping[str, Any]) -> ShapedBody | None:
    """The body's ``system`` and ``messages`` as chat messages, or None for a body the upstream must judge."""
    raw = body.get("messages")
    if not isinstance(raw, list) or not all(isinstance(m, dict) for m in raw):
        return None
    system = body.get("system")
    if system is not None and not _readable_system(system):
        return None
    lead = {"role": "system", "content": system} if system else None
    pairs = [(item, m) for m in raw for item in messages_of(m)]
    return ShapedBody.of(lead, [item for item, _ in pairs], [m for _, m in pairs])


def _readable_system(system: Any) -> bool:
    return isinstance(system, str) or (isinstance(system, list) and all(isinstance(b, dict) for b in system))


def messages_of(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The chat-shaped messages standing for one Messages API message: one, or two for a user message
    that returns tool results and says something of its own too (its results, then its words)."""
    role = message.get("role")
    content = message.get("content")
    if not isinstance(content, list):
        return [_bound({"role": role, "content": content})]
    blocks = [b for b in content if isinstance(b, Mapping)]
    results = [b for b in blocks if b.get("type") == "tool_result"]
    if role == "user" and results:
        # What the user typed during a tool loop is theirs (recorded, the query); the results are the tool's.
        parts = [p for b in results for p in _result_parts(b)]
        said = [b for b in blocks if b.get("type") != "tool_result"]
        answered = {"role": "tool", "tool_call_id": results[0].get("tool_use_id"), "content": parts}
        return [answered, {"role": "user", "content": said, BINDS_PREVIOUS: True}] if said else [answered]
    calls = [_call(b) for b in blocks if b.get("type") == "tool_use"]
    parts = [b for b in blocks if b.get("type") != "tool_use"]
    return [_bound({"role": role, "content": parts, **({"tool_calls": calls} if role == "assistant" and calls else {})})]


def _bound(message: dict[str, Any]) -> dict[str, Any]:
    """An assistant message never begins a window: the API wants the first message to be the user's."""
    return {**message, BINDS_PREVIOUS: True} if message.get("role") == "assistant" else message


def _result_parts(block: Mapping[str, Any]) -> list[Any]:
    """A ``tool_result``'s content as parts (a string is one text part)."""
    content = block.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [p for p in content if isinstance(p, Mapping)] if isinstance(content, list) else []


def _call(block: Mapping[str, Any]) -> dict[str, Any]:
    arguments = json.dumps(block.get("input"), ensure_ascii=False, sort_keys=True)
    return {"id": block.get("id"), "type": "function", "function": {"name": block.get("name"), "arguments": arguments}}


# --- the pipeline's answer, written back ---------------------------------------------


def rebuild(body: Mapping[str, Any], conv: ShapedBody, out: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The client's body with ``messages`` (and maybe ``system``) for the pipeline's ``out`` messages.

    Every other field keeps its value and its place; ``null`` stays ``null``.
    """
    origin = {id(m): o for m, o in zip(conv.items, conv.origins, strict=True)}
    added: list[str] = []
    block: str | None = None
    messages: list[dict[str, Any]] = []
    for m in out:
        if m is conv.lead:
            continue
        if id(m) in origin:
            turn = origin[id(m)]
        elif m.get("role") == "user" and (asked := _injected_into(conv.items, m)) is not None:
            block = _added_text(conv.items[asked].get("content"), m.get("content"))
            turn = conv.origins[asked]
        else:
            added.append(_text(m.get("content")))
            continue
        if not (messages and messages[-1] is turn):  # a message read as two (results, words) goes once
            messages.append(turn)
    result = dict(body)
    if block:
        messages = with_block(messages, block)
    result["messages"] = messages
    if added:
        result["system"] = [*_system_blocks(body.get("system")), *({"type": "text", "text": t} for t in added if t)]
    return result


def with_block(messages: list[dict[str, Any]], block: str) -> list[dict[str, Any]]:
    """``messages`` with ``block`` as a text block of the latest user message, placed where the API and
    the client's prompt cache want it: after the leading ``tool_result`` blocks and after the last
    ``cache_control`` breakpoint. Other messages are the same objects."""
    at = latest_user_index(messages)
    if at is None:
        return messages
    content = messages[at].get("content")
    part = {"type": "text", "text": block}
    if isinstance(content, str):
        blocks: list[Any] = [part, {"type": "text", "text": content}] if content else [part]
    elif isinstance(content, list):
        blocks = [*content[: block_position(content)], part, *content[block_position(content) :]]
    else:
        blocks = [part]
    return [*messages[:at], {**messages[at], "content": blocks}, *messages[at + 1 :]]


def block_position(content: Sequence[Any]) -> int:
    """Where the memory block goes in a user message's blocks: after leading results and breakpoints."""
    at = 0
    while at < len(content) and isinstance(content[at], Mapping) and content[at].get("type") == "tool_result":
        at += 1
    marked = [i for i, b in enumerate(content) if isinstance(b, Mapping) and b.get("cache_control")]
    return max(at, marked[-1] + 1) if marked else at


def _injected_into(items: Sequence[Mapping[str, Any]], changed: Mapping[str, Any]) -> int | None:
    """Which of ``items`` ``cards.inject`` made ``changed`` of: the latest user message whose content
    ``changed``'s ends with (a string) or holds part for part (blocks). Most often the latest user message;
    when a loop has gone on past words sent beside results (compressed since), the question that leads the
    window. Else the latest user message (``latest_user_index``)."""
    after = changed.get("content")
    for i in range(len(items) - 1, -1, -1):
        before = items[i].get("content")
        if items[i].get("role") != "user":
            continue
        if isinstance(after, str) and isinstance(before, str) and after.endswith(before):
            return i
        if isinstance(after, list) and isinstance(before, list) and {id(p) for p in before} <= {id(p) for p in after}:
            return i
    return latest_user_index(items)


def _added_text(before: Any, after: Any) -> str:
    """The text ``cards.inject`` put in front of a message's content (``before`` → ``after``)."""
    if isinstance(after, str):
        kept = before if isinstance(before, str) else ""
        return after[: len(after) - len(kept)].rstrip("\n") if after.endswith(kept) else after
    if isinstance(after, list):
        own = {id(p) for p in before} if isinstance(before, list) else set()
        return "\n\n".join(str(p.get("text", "")) for p in after if id(p) not in own and isinstance(p, Mapping))
    return ""


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping) and p.get("text"))
    return ""


def _system_blocks(system: Any) -> list[Any]:
    """The client's ``system`` as blocks: a string is one text block; blocks stay as sent."""
    if isinstance(system, str):
        return [{"type": "text", "text": system}] if system else []
    return list(system) if isinstance(system, list) else []


def render(body: Mapping[str, Any]) -> bytes:
    return json_bytes.dumps(body)


# --- replies ----------------------------------------------------------------------


def message_text(message: Any) -> str | None:
    """The text of a Message object (its ``text`` blocks); None when it is not one (an error)."""
    if not isinstance(message, Mapping) or message.get("type", "message") != "message":
        return None
    content = message.get("content")
    if not isinstance(content, list):
        return None
    texts = [str(b.get("text") or "") for b in content if isinstance(b, Mapping) and b.get("type") == "text"]
    return "\n".join(t for t in texts if t) or None


def streamed_text(body: bytes) -> str | None:
    """The text of a streamed Message: its ``text_delta`` events, once ``message_stop`` ended it.

    A stream with an ``error`` event, or one that stopped before
    ``message_stop`` (a cut connection), did not complete: None.
    """
    blocks: dict[Any, list[str]] = {}  # by the block's index: text blocks are joined like message_text's
    for event in json_events(body):
        kind = event.get("type")
        if kind == "error":
            return None
        if kind == "content_block_start":
            start = event.get("content_block")
            if isinstance(start, Mapping) and start.get("type") == "text" and isinstance(start.get("text"), str):
                blocks.setdefault(event.get("index"), []).append(start["text"])
        elif kind == "content_block_delta":
            delta = event.get("delta")
            if isinstance(delta, Mapping) and delta.get("type") == "text_delta" and isinstance(delta.get("text"), str):
                blocks.setdefault(event.get("index"), []).append(delta["text"])
        elif kind == STOP_EVENT:
            texts = ["".join(parts) for parts in blocks.values()]
            return "\n".join(t for t in texts if t) or None
    return None
