"""Which texts are short enough for their results to be kept, and the memo that keeps them.

A user's turn is masked, tokenized and counted several times over one
request and the next (``memory.redaction``, ``memory.search.bm25``,
``tokens``): each keeps its results for the short texts it was asked last,
in a bounded memo of its own (``kept``). One bound on a text's length for
them all, so that together they hold a few MB at worst; a longer text is
worked out each time.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, cast

KEPT_CHARS = 1024

F = TypeVar("F", bound=Callable[..., Any])


def kept(texts: int) -> Callable[[F], F]:
    """``fn(text, *args)``, its results kept for the ``texts`` short texts (at most ``KEPT_CHARS``
    characters) asked last; a longer text is worked out each time.

    ``fn`` must be pure, its arguments positional and hashable (strings, a mode, an encoding).
    """

    def keep(fn: F) -> F:
        memo = functools.lru_cache(maxsize=texts)(fn)

        @functools.wraps(fn)
        def call(text: str, *args: Any) -> Any:
            return memo(text, *args) if len(text) <= KEPT_CHARS else fn(text, *args)

        return cast(F, call)

    return keep
