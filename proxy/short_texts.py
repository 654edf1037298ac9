"""Which texts are short enough for their results to be kept.

A user's turn is masked, tokenized and counted several times over one
request and the next (``memory.redaction``, ``memory.search.bm25``,
``tokens``): each keeps its results for the short texts it was asked last,
in a bounded memo of its own. One bound on a text's length for them all,
so that together they hold a few MB at worst; a longer text is worked out
each time.
"""

from __future__ import annotations

KEPT_CHARS = 1024


def short(text: str) -> bool:
    """Whether the results of ``text`` are kept (at most ``KEPT_CHARS`` characters)."""
    return len(text) <= KEPT_CHARS
