"""Searching a user's raw turns (fragments) for the admin: what recall could inject, found by words.

The same index the chat path searches (``FragmentIndex.scope``: the active
fragments, brought up to date first) and the same rule as the memories'
search (``fusion.matches``): hybrid cosine + BM25 above the query's floor,
and every turn holding the query's text as it is. Only active fragments are
searched: a superseded or forgotten one is never recalled, and is listed,
not searched.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from ...store.records import Fragment
from ..search.bm25 import tokenize
from ..search.fragment_index import FragmentIndex, keyword_scores, vector_scores
from ..search.fusion import matches


@dataclass(frozen=True)
class FoundTurn:
    fragment: Fragment
    score: float
    vector: float | None
    bm25: float | None


# (tenant, user, query, session or None, weights, limit) → the turns found, best first.
SearchTurns = Callable[
    [str, str, str, str | None, tuple[float, float], int], Coroutine[Any, Any, list[FoundTurn]]
]


def turn_search(index: FragmentIndex) -> SearchTurns:
    """A ``SearchTurns`` over ``index``; call it where ``index`` is searched (its loop)."""

    async def search(
        tenant: str, user: str, query: str, session: str | None, weights: tuple[float, float], limit: int
    ) -> list[FoundTurn]:
        if not query.strip():
            return []
        scope = await index.scope(tenant, user)
        keyword, _ = keyword_scores(scope, tokenize(query))
        vector = await vector_scores(scope, await index.query_vector(query), list(keyword))
        needle = query.strip().casefold()
        turns = {i: f for i, f in scope.fragments.items() if session is None or f.session == session}
        literal = {i for i, f in turns.items() if needle in f.text.casefold()}
        found = matches(vector, keyword, literal, query, weights, limit, turns.__contains__)
        return [FoundTurn(turns[s.id], s.score, s.vector.raw, s.bm25.raw) for s in found]

    return search
