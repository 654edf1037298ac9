"""The forwarded messages: leading messages, one system message of summaries (and memory), the window.

Pure and byte-stable: the same input gives byte-identical output, because the
forwarded prefix is what providers' prompt caches key on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# Byte-stable: this header is part of the forwarded prefix that providers cache.
SUMMARY_HEADER = (
    "Summary of the earlier conversation (compressed by Paperclip; turns {first}–{last}):"
)


def summary_message_text(summaries: Sequence[tuple[str, int, int]], memory_head: str | None) -> str:
    """The text of the summary system message: header, each summary oldest first, memory last."""
    blocks: list[str] = []
    if summaries:
        first, last = summaries[0][1], summaries[-1][2]
        blocks.append(SUMMARY_HEADER.format(first=first, last=last))
        blocks.extend(text for text, _, _ in summaries)
    if memory_head:
        blocks.append(memory_head)
    return "\n\n".join(blocks)


def assemble(
    leading: Sequence[dict[str, Any]],
    summaries: Sequence[tuple[str, int, int]],
    window: Sequence[dict[str, Any]],
    memory_head: str | None = None,
) -> list[dict[str, Any]]:
    """The forwarded messages.

    ``summaries`` are ``(text, first_turn, last_turn)``, oldest first, as stored.
    The leading and window messages are the client's own objects, unchanged.
    When there are summaries or a memory head, one system message follows the
    leading messages. Same input, byte-identical output: prompt caches rely on it.
    """
    text = summary_message_text(summaries, memory_head)
    middle = [{"role": "system", "content": text}] if text else []
    return [*leading, *middle, *window]


def turn_range(start: int, end: int) -> tuple[int, int]:
    """The 1-based turns (first, last) that the conversation range ``[start, end)`` covers."""
    return start + 1, end
