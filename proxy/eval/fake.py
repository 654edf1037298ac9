"""A deterministic stand-in for the compression model, in process (no socket, no network).

The replay must not depend on a paid model, and its figures must be
reproducible: every summary is made of the first six words of each source
line, at most a third of the source's words — shorter than its source, so the
compressor accepts it, and never a verbatim copy of a whole turn longer than
six words (a paraphrase in a summary does not count as evidence). Extraction
prompts get the same kind of reply, which is not JSON, so the rule-based
extractor stands in, as it does when a real model misbehaves (``--model
rules``). ``FakeCompressionModel`` answers with another function when given
one: ``stand_in.StandIn`` for ``--model observations``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import httpx

_INNER = re.compile(r"<(transcript|summaries|conversation)>\n?(.*?)</\1>", re.S)


def fake_summary(messages: list[dict[str, Any]]) -> str:
    """A deterministic 'summary': the first six words of every source line, at most a third of it."""
    prompt = str(messages[-1].get("content", ""))
    found = _INNER.search(prompt)
    source = found.group(2) if found else prompt
    lines = [ln for ln in source.splitlines() if ln.strip()]
    words = " / ".join(" ".join(ln.split()[:6]) for ln in lines).split()
    return "Summary: " + " ".join(words[: max(3, len(source.split()) // 3)])


def completion(text: str, model: str = "fake-compressor") -> dict[str, Any]:
    return {
        "id": "chatcmpl-eval",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }


Answer = Callable[[list[dict[str, Any]]], str]
"""A stand-in's reply text to a call's chat messages."""


class FakeCompressionModel:
    """An ``httpx`` transport answering compression and extraction calls with ``answer``; it counts them."""

    def __init__(self, answer: Answer = fake_summary) -> None:
        self.answer = answer
        self.calls = 0

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self._handle)

    def _handle(self, request: httpx.Request) -> httpx.Response:
        if not request.url.path.endswith("/chat/completions"):
            return httpx.Response(404, json={"error": {"message": "not faked", "type": "not_found"}})
        body = json.loads(request.content)
        self.calls += 1
        return httpx.Response(200, json=completion(self.answer(body["messages"]), body.get("model", "")))
