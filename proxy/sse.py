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
    """The assembled ``content`` of choice 0 of a streamed completion, or None."""
    parts: list[str] = []
    for payload in events(body):
        if payload.strip() == "[DONE]":
            break
        try:
            event: Any = json.loads(payload)
        except ValueError:
            continue
        for choice in event.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            content = (choice.get("delta") or {}).get("content")
            if isinstance(content, str):
                parts.append(content)
    return "".join(parts) or None
