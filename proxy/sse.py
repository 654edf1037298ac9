"""Reading an SSE stream after the fact (pure; the relay never parses)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any


def events(body: bytes) -> Iterator[str]:
    """The ``data:`` payloads of an SSE body, in order (multi-line data joined by newlines)."""
    text = body.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")
    for block in text.split("\n\n"):
        data = [ln[5:].removeprefix(" ") for ln in block.split("\n") if ln.startswith("data:")]
        if data:
            yield "\n".join(data)


def json_events(body: bytes) -> Iterator[Mapping[str, Any]]:
    """The JSON objects of an SSE body's ``data:`` payloads, in order (other payloads skipped)."""
    for payload in events(body):
        try:
            event: Any = json.loads(payload)
        except ValueError:
            continue
        if isinstance(event, Mapping):
            yield event


def assistant_text(body: bytes) -> str | None:
    """The assembled ``content`` of choice 0 of a streamed completion that completed, else None.

    Only what the model really said is an answer (SPEC §9): a stream that
    carries an error event, or ends before its ``[DONE]``, did not complete,
    and none of its text is.
    """
    parts: list[str] = []
    for payload in events(body):
        if payload.strip() == "[DONE]":
            return "".join(parts) or None
        try:
            event: Any = json.loads(payload)
        except ValueError:
            continue
        if not isinstance(event, dict):
            continue
        if event.get("error") is not None:
            return None
        for choice in event.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            if choice.get("finish_reason") == "error":  # how some gateways end a failed stream
                return None
            delta = choice.get("delta")
            content = delta.get("content") if isinstance(delta, dict) else None
            if isinstance(content, str):
                parts.append(content)
    return None
