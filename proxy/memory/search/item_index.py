"""The structured memories' side of the hybrid search: every live item of a user, in memory."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ...store.interface import Items
from ...store.records import ItemRow
from ..lifecycle import is_expired
from ..memory_schema import is_guess
from ..recall.changed_since import changed_later
from ..recall.profile import ProfileMemo
from .bm25 import BM25Index, tokenize


@dataclass
class ItemScope:
    version: tuple[int, float] = (-1, 0.0)
    rows: list[ItemRow] = field(default_factory=list)
    matrix: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))
    bm25: BM25Index[int] = field(default_factory=BM25Index)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    profile: ProfileMemo = field(default_factory=ProfileMemo)  # the profile of ``rows`` at ``version``
    changed: frozenset[int] = frozenset()  # the ids of ``rows`` a later one may have changed (``changed_since``)
    changed_turns: frozenset[str] = frozenset()  # the fragment hashes of the turns those were read from
    # The fragment hashes of the turns a replaced guess was read from: a supersede leaves them stored (a reading
    # of a turn may be wrong), and recall shows them marked as since changed (``turns_changed_later``).
    replaced_turns: frozenset[str] = frozenset()

    def hold(self, rows: list[ItemRow], matrix: np.ndarray) -> None:
        """Hold ``rows`` (with their vectors, ``matrix``): their BM25 index and their marks, read once."""
        self.rows, self.matrix, self.bm25 = rows, matrix, BM25Index()
        terms = {row.id: tokenize(row.content) for row in rows}
        for row in rows:
            self.bm25.add(row.id, terms[row.id])
        self.changed = changed_later(rows, lambda row: terms[row.id])
        self.changed_turns = frozenset(h for row in rows if row.id in self.changed for h in row.fragment_hashes)


@dataclass(frozen=True)
class ItemCandidates:
    """Raw scores of the user's live items for one query, and the rows to render them."""

    vector: dict[int, float]
    bm25: dict[int, float]
    rows: dict[int, ItemRow]


class ItemIndex:
    """The items' side of the hybrid search.

    A user holds few items (hundreds, not the fragments' tens of thousands), so
    each scope keeps all its active items and their vectors in memory, reloaded
    when the stored version (count, last update) changes: cosines are exact
    for every item, BM25 covers every item.
    """

    def __init__(self, store: Items) -> None:
        self.store = store
        self._scopes: dict[tuple[str, str], ItemScope] = {}

    async def scope(self, tenant: str, user: str) -> ItemScope:
        """The user's live items in memory, reloaded when the stored ones changed."""
        scope = self._scopes.setdefault((tenant, user), ItemScope())
        async with scope.lock:
            version = await self.store.version(tenant, user)
            if version != scope.version:
                # One read: the active items (their vectors too) and the superseded ones, whose guesses'
                # turns recall marks; not every stored item again beside the active ones.
                pairs, superseded = await self.store.active_and_superseded(tenant, user)
                scope.hold([r for r, _ in pairs],
                           np.vstack([v for _, v in pairs]) if pairs else np.zeros((0, 0), dtype=np.float32))
                scope.replaced_turns = replaced_guess_turns(scope.rows, superseded)
                scope.version = version
        return scope

    async def touch(self, tenant: str, user: str, ids: Sequence[int]) -> None:
        await self.store.touch(tenant, user, ids)

    def forget_scope(self, tenant: str, user: str) -> None:
        self._scopes.pop((tenant, user), None)


def session_view(scope: ItemScope, session: str) -> ItemScope:
    """The items ``session`` said, as a scope of their own (``memory.scope: session``): its profile, its hits
    and its marks (``changed_since``) read none of the user's other sessions. Built for each request: a
    session holds few items."""
    keep = [i for i, row in enumerate(scope.rows) if row.session == session]
    view = ItemScope(version=scope.version, replaced_turns=scope.replaced_turns)
    view.hold([scope.rows[i] for i in keep], scope.matrix[keep] if keep else view.matrix)
    return view


def replaced_guess_turns(active: Sequence[ItemRow], stored: Sequence[ItemRow]) -> frozenset[str]:
    """The hashes of the turns superseded guesses among ``stored`` were read from, but for those a live fact of
    ``active`` was read from too (the turn that said the new value)."""
    live = {h for row in active for h in row.fragment_hashes}
    return frozenset(h for row in stored if row.status == "superseded" and is_guess(row.confidence)
                     for h in row.fragment_hashes if h not in live)


def item_candidates(
    scope: ItemScope, query_vector: np.ndarray, terms: Sequence[str], k: int
) -> ItemCandidates:
    """Raw cosine and BM25 of the scope's unexpired items: the ``k`` best of each, cosine known for all."""
    if not scope.rows:
        return ItemCandidates({}, {}, {})
    now = dt.datetime.now(dt.UTC)
    live = [i for i, r in enumerate(scope.rows) if not is_expired(r.expires_at, now)]
    cosines = scope.matrix @ np.asarray(query_vector, dtype=np.float32)
    top = sorted(live, key=lambda i: -float(cosines[i]))[:k]
    bm25 = scope.bm25.scores(list(terms), limit=k)
    ids = {scope.rows[i].id: i for i in live}
    vector = {scope.rows[i].id: float(cosines[i]) for i in top}
    for item_id in bm25:
        if item_id in ids:
            vector[item_id] = float(cosines[ids[item_id]])
    bm25 = {i: s for i, s in bm25.items() if i in ids}
    rows = {r.id: r for r in scope.rows if r.id in vector or r.id in bm25}
    return ItemCandidates(vector, bm25, rows)
