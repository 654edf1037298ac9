"""The Responses API's shape of a call: input items ↔ the pipeline's messages, and its replies read back.

Pure: no I/O. A ``POST /v1/responses`` body is another shape of the chat
pipeline's input, so each input item becomes one chat-shaped message and the
pipeline's rules (watermark, recall, injection, recording) apply unchanged:

- a message item (typed or the short ``{"role", "content"}`` form) keeps its
  role and its content, string or parts (``input_text`` parts read as text);
- a ``function_call`` (any ``*_call``) is an assistant message with
  ``tool_calls`` and a ``*_call_output`` a ``tool`` message, so the planner
  never separates a call from its output;
- a ``reasoning`` item has the role ``reasoning``, which the planner binds to
  what follows it;
- ``instructions`` (a string) is a leading system message, so it is counted.

``rebuild`` maps the pipeline's answer back: a message it did not touch is
the client's own item, unchanged; the latest user message with the memory
block becomes that item with its new content (a string ``input`` stays a
string); a message the pipeline added (summaries, ``system_tail``'s block) is
a ``developer`` item in place, or goes into ``instructions`` for
``system_head``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .. import json_bytes
from ..memory.recall.query import latest_user_index
from ..message_text import text_of
from ..sse import json_events
from .shaped_body import ShapedBody

# Response states whose output is an answer worth recording ("incomplete": cut at max_output_tokens).
ANSWERED = frozenset({"completed", "incomplete"})


def as_messages(body: Mapping[str, Any]) -> ShapedBody | None:
    """The body's ``instructions`` and ``input`` as messages, or None for an input the upstream must judge."""
    raw = body.get("input")
    if isinstance(raw, str):
        origins: list[Any] = [raw]
        items = [{"role": "user", "content": raw}]
    elif isinstance(raw, list) and all(isinstance(i, dict) for i in raw):
        origins = list(raw)
        items = [message_of(i) for i in raw]
    else:
        return None
    instructions = body.get("instructions")
    lead = {"role": "system", "content": instructions} if isinstance(instructions, str) else None
    return ShapedBody.of(lead, items, origins)  # origins: the input items, or the string input


def message_of(item: Mapping[str, Any]) -> dict[str, Any]:
    """The chat-shaped message standing for one input item."""
    kind = str(item.get("type") or ("message" if "role" in item else ""))
    if kind == "message":
        return {"role": item.get("role"), "content": item.get("content")}
    if kind == "reasoning":
        return {"role": "reasoning", "content": _summary_text(item.get("summary"))}
    if kind.endswith("_call_output") or kind == "mcp_approval_response":
        output = item.get("output")
        content = output if isinstance(output, str | list) else json.dumps(output, ensure_ascii=False)
        return {"role": "tool", "tool_call_id": item.get("call_id"), "content": content}
    if kind.endswith("_call") or kind == "mcp_approval_request":
        arguments = item.get("arguments")
        if not isinstance(arguments, str):
            arguments = json.dumps({k: v for k, v in item.items() if k not in ("type", "id")}, ensure_ascii=False)
        call = {"name": item.get("name") or kind, "arguments": arguments}
        return {"role": "assistant", "content": None,
                "tool_calls": [{"id": item.get("call_id") or item.get("id"), "type": "function", "function": call}]}
    return {"role": kind or "item", "content": None}  # item_reference and the like: carried, never read


def _summary_text(summary: Any) -> str:
    """A reasoning item's readable summary (its ``encrypted_content`` is opaque, not counted)."""
    parts = summary if isinstance(summary, list) else []
    return "\n".join(str(p.get("text", "")) for p in parts if isinstance(p, Mapping))


def rebuild(
    body: Mapping[str, Any], conv: ShapedBody, out: Sequence[dict[str, Any]], *, head_in_instructions: bool
) -> dict[str, Any]:
    """The client's body with ``input`` (and maybe ``instructions``) for the pipeline's ``out`` messages.

    Every other field keeps its value and its place; ``null`` stays ``null``.
    """
    origin = {id(m): o for m, o in zip(conv.items, conv.origins, strict=True)}
    latest = latest_user_index(conv.items)
    added: list[str] = []
    items: list[Any] = []
    for m in out:
        if m is conv.lead:
            continue
        if id(m) in origin:
            o = origin[id(m)]
            items.append({"role": "user", "content": o} if isinstance(o, str) else o)
        elif m.get("role") == "user" and latest is not None:
            items.append(_with_content(conv.origins[latest], conv.items[latest], m.get("content")))
        elif head_in_instructions:
            added.append(text_of(m))
        else:
            items.append({"role": "developer", "content": m.get("content")})
    result = dict(body)
    string_input = isinstance(body.get("input"), str)
    result["input"] = items[0]["content"] if string_input and len(items) == 1 else items
    if added:
        before = body.get("instructions")
        result["instructions"] = "\n\n".join([before, *added] if isinstance(before, str) and before else added)
    return result


def _with_content(origin: Any, message: Mapping[str, Any], content: Any) -> dict[str, Any]:
    if isinstance(origin, str):
        return {"role": "user", "content": content}
    if isinstance(content, list):
        kept = {id(p) for p in message.get("content") or []}
        content = [_input_part(p) if id(p) not in kept else p for p in content]
    return {**origin, "content": content}


def _input_part(part: Any) -> Any:
    """A text part the pipeline added (chat's ``text``) in the Responses API's form."""
    if isinstance(part, Mapping) and part.get("type") == "text":
        return {"type": "input_text", "text": part.get("text")}
    return part


def render(body: Mapping[str, Any]) -> bytes:
    return json_bytes.dumps(body)


# --- replies ----------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """What a Responses reply said: its id and the assistant's text (None when it failed)."""

    id: str | None
    text: str | None


def answer_of(response: Any) -> Answer | None:
    """The answer in a response object; None when it failed or is not one."""
    if not isinstance(response, Mapping) or response.get("status", "completed") not in ANSWERED:
        return None
    rid = response.get("id")
    return Answer(rid if isinstance(rid, str) else None, output_text(response.get("output")))


def output_text(output: Any) -> str | None:
    """The text of the assistant's output messages (refusals and tool calls are not text)."""
    if not isinstance(output, list):
        return None
    texts = [text_of(o) for o in output if isinstance(o, Mapping) and o.get("type", "message") == "message"
             and o.get("role", "assistant") == "assistant"]
    return "\n".join(t for t in texts if t) or None


def streamed_answer(body: bytes) -> Answer | None:
    """The answer in an SSE stream of response events: ``response.completed`` (or the deltas until then).

    None for a stream that failed or ended before its ``response.completed``
    (or ``response.incomplete``): only what the model really said is recorded.
    """
    deltas: list[str] = []
    for event in json_events(body):
        kind = event.get("type")
        if kind in ("response.failed", "error"):
            return None
        if kind == "response.output_text.delta" and isinstance(event.get("delta"), str):
            deltas.append(event["delta"])
        elif kind in ("response.completed", "response.incomplete"):
            done = answer_of(event.get("response"))
            if done is not None and done.text is None and deltas:
                return Answer(done.id, "".join(deltas))
            return done
    return None  # no response.completed: the reply did not complete, and nothing of it is an answer
