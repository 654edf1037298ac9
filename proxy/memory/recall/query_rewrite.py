"""Query rewriting (``memory.query_rewrite``): the compression model turns the latest message into a search query.

One call per request, on the request path, at the compression model's
temperature (0 by default) — so it is off by default and costs what
bench/results/2026-12-01-retrieval.md "Ablations" measures. The rewrite *extends* the plain
query (``build_query``) rather than replacing it: what the user wrote is
always searched, the model's line adds the implied words (a recipe question
gains "diet, allergies"). Any failure — an error, a timeout
(``memory.query_rewrite_timeout_s``), an empty or runaway reply — leaves the
plain query. The prompt (``prompts/query_rewrite.md``) sees the latest user
message and the ``CONTEXT_MESSAGES`` before it, each cut to ``CONTEXT_CHARS``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from ...prompts import Prompts
from .query import asked_index, words_of

log = logging.getLogger("paperclip.memory")

Complete = Callable[[list[dict[str, Any]]], Awaitable[str]]

CONTEXT_MESSAGES = 4
CONTEXT_CHARS = 400
MESSAGE_CHARS = 2000
# The prompt asks for at most 30 words; a reply far past that is not a query.
MAX_REPLY_CHARS = 400


def rewrite_prompt(prompts: Prompts, messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The rendered prompt for the question asked (``asked_index``); None when there is none to rewrite."""
    i = asked_index(messages)
    if i is None:
        return None
    message = words_of(messages[i])
    if not message:
        return None
    recent = [
        f"{m.get('role')}: {words_of(m)[:CONTEXT_CHARS]}"
        for m in messages[max(0, i - CONTEXT_MESSAGES) : i]
        if m.get("role") in ("user", "assistant") and words_of(m)
    ]
    return prompts.render("query_rewrite", context="\n".join(recent), message=message[:MESSAGE_CHARS])


def parse_rewrite(reply: str) -> str | None:
    """The query line of the model's reply; None for an empty or runaway reply."""
    lines = [ln.strip().strip("\"'“”") for ln in reply.strip().splitlines() if ln.strip()]
    if not lines or len(lines[0]) > MAX_REPLY_CHARS:
        return None
    return lines[0] or None


def extended_query(plain: str, rewrite: str | None) -> str:
    """What recall searches: the plain query, and the rewrite's line when it adds something."""
    if not rewrite or rewrite.casefold() == plain.casefold():
        return plain
    return f"{plain}\n{rewrite}"


async def rewritten_query(
    complete: Complete, prompts: Prompts, messages: Sequence[Mapping[str, Any]], timeout_s: float
) -> str | None:
    """The model's query for the latest message, or None (no message, failure, timeout): never raises."""
    prompt = rewrite_prompt(prompts, messages)
    if prompt is None:
        return None
    try:
        async with asyncio.timeout(timeout_s):
            reply = await complete([{"role": "user", "content": prompt}])
    except Exception as exc:  # the plain query serves: a rewrite is an optional extra
        log.warning("query rewrite failed, searching the plain query: %r", exc)
        return None
    return parse_rewrite(reply)
