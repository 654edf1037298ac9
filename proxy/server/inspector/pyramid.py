"""A session's summary chain as a pyramid: one row per level, each summary placed over the turns it covers.

Pure: from the stored summaries (level, first and last turn, tokens) to rows
of blocks with their left offset and width in percent of the conversation,
highest level on top. Gaps (turns no summary at that level covers) stay empty.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Block:
    id: str
    level: int
    first_turn: int  # 1-based, as people count turns
    last_turn: int
    tokens: int
    text: str
    left: float  # percent of the conversation's width
    width: float


def pyramid(summaries: Sequence[Mapping[str, Any]], watermark: int) -> list[list[Block]]:
    """Rows of blocks, top level first; ``start``/``end`` are 0-based [start, end) message indexes."""
    span = max([watermark, *(int(s["end"]) for s in summaries)])
    if span <= 0:
        return []
    levels: dict[int, list[Block]] = {}
    for s in sorted(summaries, key=lambda s: (int(s["level"]), int(s["start"]))):
        start, end = int(s["start"]), int(s["end"])
        levels.setdefault(int(s["level"]), []).append(
            Block(
                id=str(s["id"]), level=int(s["level"]), first_turn=start + 1, last_turn=end,
                tokens=int(s["tokens"]), text=str(s["text"]),
                left=round(100.0 * start / span, 3), width=round(100.0 * max(end - start, 0) / span, 3),
            )
        )
    return [levels[level] for level in sorted(levels, reverse=True)]
