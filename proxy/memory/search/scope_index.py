"""One user's fragments in memory: BM25 postings, document frequencies, a float32 matrix of the vectors.

``FragmentIndex`` (``fragment_index``) keeps one per user searched
recently and brings it up to date from the store; the k-NN is one product
of the query with every row, the top ``k`` picked by a partition.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence

import numpy as np

from ...offload import off_loop
from ...store.records import Fragment
from ..recall.changed_since import change_said
from ..recall.query import fragment_hash
from ..recall.speakers import Mentions
from .bm25 import BM25Index

# A term is "common" for a user (see query.focus) when at least this many of
# their fragments, and at least this share of them, contain it.
COMMON_MIN_DOCS = 20
COMMON_SHARE = 0.05

class ScopeIndex:
    """One user's fragments in memory: BM25, document frequencies, vectors by row, fragments by id.

    Fragments are held whole (texts too). A fragment deleted or suppressed
    since it was loaded is never shown: that bumps the scope's generation in
    the store, and ``FragmentIndex.scope`` drops it on seeing it.
    """

    def __init__(self, dim: int) -> None:
        self.bm25: BM25Index[int] = BM25Index()
        # Document frequency of each term: which words are everywhere in this history.
        self.df: Counter[str] = Counter()
        self.mentions = Mentions()  # which side says each term: who a name is (``speakers``)
        self.last_id = 0
        self.lock = asyncio.Lock()
        self.generation = -1  # the store's, when this index last read it; -1: not yet
        self.size = 0
        self.ids = np.zeros(0, dtype=np.int64)
        self.created = np.zeros(0, dtype=np.float64)
        self.matrix = np.zeros((0, dim), dtype=np.float32)
        self.rows: dict[int, int] = {}
        self.fragments: dict[int, Fragment] = {}
        # The user's turns by fragment hash (what an item names the turns it was read from), and those that
        # say a change outright (``changed_since.change_said``), read as recall first needs them
        # (``said_changes``).
        self._turns: dict[str, int] = {}
        self._changes: list[tuple[str, Fragment]] = []
        self._turns_read = 0  # rows read into those

    def add(self, fragment: Fragment, terms: list[str], vector: np.ndarray) -> None:
        doc_id = fragment.id
        self.fragments[doc_id] = fragment
        self.bm25.add(doc_id, terms)
        self.df.update(set(terms))
        self.mentions.add(fragment, terms)
        self.last_id = max(self.last_id, doc_id)
        if self.size == len(self.ids):
            self._grow(max(1024, 2 * self.size))
        # The vector is written before the row is counted: a search running in
        # a worker thread meanwhile never reads a row that is not there yet.
        self.matrix[self.size] = vector
        self.ids[self.size] = doc_id
        self.created[self.size] = fragment.created
        self.rows[doc_id] = self.size
        self.size += 1

    def _grow(self, capacity: int) -> None:
        matrix = np.zeros((capacity, self.matrix.shape[1]), dtype=np.float32)
        matrix[: self.size] = self.matrix[: self.size]
        ids = np.zeros(capacity, dtype=np.int64)
        ids[: self.size] = self.ids[: self.size]
        created = np.zeros(capacity, dtype=np.float64)
        created[: self.size] = self.created[: self.size]
        self.matrix, self.ids, self.created = matrix, ids, created

    async def said_changes(self) -> list[tuple[str, Fragment]]:
        """The user's active turns that say a change outright, with their fragment hashes: her turns added
        since the last call are read first (on a worker thread when there is much of them: ``offload``)."""
        ids = self.ids[self._turns_read : self.size].tolist()
        self._turns_read = self.size  # taken: a call meanwhile does not read them again
        unread = [f for i in ids if (f := self.fragments.get(i)) is not None and f.role == "user"]
        if unread:
            hashes, changes = await off_loop(sum(len(t.text) for t in unread), _hashes_and_changes, unread)
            self._turns.update(hashes)
            self._changes.extend(changes)
        return [(h, t) for h, t in self._changes if t.id in self.fragments]

    def turn(self, fragment_hash: str) -> Fragment | None:
        """The user's turn of ``fragment_hash``, while it is active (of the turns ``said_changes`` has read)."""
        found = self._turns.get(fragment_hash)
        return self.fragments.get(found) if found is not None else None

    def turn_of(self, fragment: Fragment) -> int:
        """``fragment``'s place in this user's history: fragments load in the order they were stored,
        so this counts her own turns only (others' stored in between are not her history)."""
        return self.rows[fragment.id]

    def is_common(self, term: str) -> bool:
        df = self.df.get(term, 0)
        return df >= COMMON_MIN_DOCS and df >= COMMON_SHARE * len(self.bm25)

    def snapshot(self) -> tuple[np.ndarray, np.ndarray]:
        """Views of the vectors and their ids as they are now, safe to read in another thread."""
        return self.matrix[: self.size], self.ids[: self.size]

    def created_between(self, start: float, end: float, limit: int) -> list[int]:
        """Ids of fragments created in [start, end] (epoch seconds), oldest first, at most ``limit``."""
        n = self.size
        inside = np.flatnonzero((self.created[:n] >= start) & (self.created[:n] <= end))[:limit]
        return [int(i) for i in self.ids[inside]]

    def cosines(self, ids: Sequence[int], query: np.ndarray, sims: np.ndarray | None = None) -> dict[int, float]:
        """Cosines of ``ids`` to ``query``: read from ``sims`` (the product of every row) where it has the row."""
        found = [(i, self.rows[i]) for i in ids if i in self.rows]
        known = len(sims) if sims is not None else 0
        read = [(i, row) for i, row in found if row < known]
        out: dict[int, float] = {}
        if sims is not None and read:  # one gather, not a numpy scalar per id
            out = dict(zip([i for i, _ in read], sims[[row for _, row in read]].tolist(), strict=True))
        rest = [(i, row) for i, row in found if row >= known]
        if rest:  # rows added after ``sims`` was taken
            more = self.matrix[[row for _, row in rest]] @ query
            out.update({i: float(s) for (i, _), s in zip(rest, more.tolist(), strict=True)})
        return out


def _hashes_and_changes(turns: Sequence[Fragment]) -> tuple[dict[str, int], list[tuple[str, Fragment]]]:
    """The fragment hash of each of the user's ``turns``, and those of them that say a change outright."""
    hashes = {fragment_hash(t.role, t.text): t.id for t in turns}
    by_id = {i: h for h, i in hashes.items()}
    return hashes, [(by_id[t.id], t) for t in turns if t.id in by_id and change_said(t.text)]


def top_of(sims: np.ndarray, ids: np.ndarray, k: int) -> dict[int, float]:
    """The ``k`` best of ``sims`` (one per row of ``ids``), by id."""
    if not len(ids) or k <= 0:
        return {}
    top = np.argpartition(-sims, k - 1)[:k] if k < len(ids) else np.arange(len(ids))
    return dict(zip(ids[top].tolist(), sims[top].tolist(), strict=True))
