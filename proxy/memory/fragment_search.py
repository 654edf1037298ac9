"""The fragments' side of the hybrid search: indexing turns after a response, searching them on the request path.

Blocking work (embedding, SQLite) runs off the event loop: embeddings on one
dedicated thread (the embedder runs its own threads inside it), SQLite through the store's
own threads. The BM25 side is an in-memory index per scope (tenant + user),
loaded incrementally from the stored terms, so a search touches only the
documents that share a term with the query.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
from collections import Counter, OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..store.fragments import Fragment, NewFragment
from ..store.interface import Fragments
from ..tokens import TokenCounter
from .bm25 import BM25Index, tokenize
from .embedder import Embedder
from .query import Period, fragment_hash
from .redaction import redact
from .speakers import Mentions

# How many candidates each retriever contributes before fusion. Generous on
# purpose: the fused ranking, not either retriever alone, decides what fits
# the budget, and a turn that only one of them ranks ~100th is often the one
# that holds the answer (measured on LoCoMo: docs/retrieval.md).
CANDIDATES = 200
# Fragments created in a period the query names join the candidates, up to this many.
PERIOD_CANDIDATES = 200
# A period is widened by this much on each side: "on 3 May" asked in another time zone.
PERIOD_SLACK_S = 86_400.0
# A term is "common" for a user (see query.focus) when at least this many of
# their fragments, and at least this share of them, contain it.
COMMON_MIN_DOCS = 20
COMMON_SHARE = 0.05
# The in-memory side of the index (BM25 postings and a float32 matrix of the
# vectors, ~5 kB a fragment in all) is kept for the users searched most
# recently, up to this many fragments; an evicted user is reloaded on their
# next request (~0.3 s per 10k fragments). In memory because sqlite-vec scans
# 100k vectors in ~85 ms where a matrix product takes ~10 ms.
CACHED_FRAGMENTS = 100_000
# Up to this many vectors the k-NN runs on the event loop (~1 ms at 20k);
# past it, in a worker thread.
INLINE_ROWS = 20_000
_LOAD_BATCH = 5_000


class _ScopeIndex:
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

    def cosines(self, ids: Sequence[int], query: np.ndarray) -> dict[int, float]:
        found = [(i, self.rows[i]) for i in ids if i in self.rows]
        if not found:
            return {}
        sims = self.matrix[[row for _, row in found]] @ query
        return {i: float(s) for (i, _), s in zip(found, sims.tolist(), strict=True)}


def nearest(matrix: np.ndarray, ids: np.ndarray, query: np.ndarray, k: int) -> dict[int, float]:
    """The ``k`` rows of ``matrix`` most similar to ``query`` (unit vectors: dot = cosine), by id."""
    if not len(ids) or k <= 0:
        return {}
    sims = matrix @ query
    top = np.argpartition(-sims, k - 1)[:k] if k < len(ids) else np.arange(len(ids))
    return dict(zip(ids[top].tolist(), sims[top].tolist(), strict=True))


def single_threaded_blas() -> None:
    """One BLAS thread for numpy, process-wide.

    The k-NN is one matrix-vector product, bound by memory bandwidth: a
    second BLAS thread gains little (100k vectors: 23 ms with two, 17 ms with
    one, measured while the other core was busy) and stalls when the other
    core is taken by the embedder or another process (10k vectors: p99 13 ms
    with two, 1.7 ms with one).
    """
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")


class FragmentIndex:
    def __init__(self, store: Fragments, embedder: Embedder, counter: TokenCounter) -> None:
        single_threaded_blas()
        self.store = store
        self.embedder = embedder
        self.counter = counter
        # Two threads: a query's embedding (request path) never waits behind
        # a batch being indexed after some other response.
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="paperclip-embed")
        self._query_pool = ThreadPoolExecutor(1, thread_name_prefix="paperclip-embed-query")
        self._scopes: OrderedDict[tuple[str, str], _ScopeIndex] = OrderedDict()

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embeddings for background work (indexing, extraction, admin)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, self.embedder.embed, list(texts))

    async def embed_query(self, text: str) -> np.ndarray:
        """One query's embedding, on the request path."""
        loop = asyncio.get_running_loop()
        vectors: np.ndarray = await loop.run_in_executor(self._query_pool, self.embedder.embed, [text])
        return np.asarray(vectors[0])

    async def index(
        self,
        tenant: str,
        user: str,
        session: str,
        positions: Sequence[tuple[int, str, str]],
        pii: str,
        created: float | None = None,
    ) -> int:
        """Index the messages at ``positions`` (position, role, text) not yet known. Returns how many."""
        hashes = [fragment_hash(role, text) for _, role, text in positions]
        known = await self.store.known(tenant, user, hashes)
        fresh: list[NewFragment] = []
        seen: set[str] = set()
        for (position, role, text), h in zip(positions, hashes, strict=True):
            if h in known or h in seen:
                continue
            seen.add(h)
            clean = redact(text, pii) if pii != "keep" else text
            terms = " ".join(tokenize(clean))
            fresh.append(NewFragment(h, role, clean, terms, position, self.counter.text(clean)))
        if not fresh:
            return 0
        vectors = await self.embed([f.text for f in fresh])
        return await self.store.add(tenant, user, session, fresh, vectors, created)

    def cached(self, tenant: str, user: str) -> _ScopeIndex | None:
        """The user's in-memory index as it is, if loaded (it may lack the latest fragments)."""
        return self._scopes.get((tenant, user))

    async def scope(self, tenant: str, user: str) -> _ScopeIndex:
        """The user's in-memory index, with the fragments stored since it was last read.

        When the scope's generation changed (a forget or a supersede, in this
        process or another), what it holds is brought back to exactly the
        active fragments.
        """
        key = (tenant, user)
        scope = self._scopes.get(key)
        if scope is None:
            scope = self._scopes[key] = _ScopeIndex(self.embedder.dim)
        self._scopes.move_to_end(key)
        async with scope.lock:
            current = await self._load(scope, tenant, user)
        if not current:
            # Older fragments went away or were hidden: start again, in a new
            # object (a search already holding the old one finishes with it).
            if self._scopes.get(key) is scope:
                self._scopes[key] = _ScopeIndex(self.embedder.dim)
            return await self.scope(tenant, user)
        self._evict()
        return scope

    async def _load(self, scope: _ScopeIndex, tenant: str, user: str) -> bool:
        """Add what was stored since ``scope`` last read; False if it must be rebuilt instead.

        On a new generation, fragments no longer active leave ``fragments``
        (their vectors and postings stay until the next rebuild, but never
        become candidates): a supersede costs one read of the active ids, not
        a reload. When most are gone (a forget), the scope is rebuilt.
        """
        while True:
            generation, rows = await self.store.load_since(tenant, user, scope.last_id, _LOAD_BATCH)
            if scope.generation >= 0 and generation != scope.generation:
                active = await self.store.active_ids(tenant, user)
                if 2 * len(active) < len(scope.fragments):
                    return False
                for gone in [i for i in scope.fragments if i not in active]:
                    del scope.fragments[gone]
            scope.generation = generation
            for row in rows:
                scope.add(row.fragment, row.terms.split(), row.vector)
            if len(rows) < _LOAD_BATCH:
                return True

    def _evict(self) -> None:
        """Drop the least recently searched users while over ``CACHED_FRAGMENTS`` (never the latest)."""
        total = sum(s.size for s in self._scopes.values())
        while total > CACHED_FRAGMENTS and len(self._scopes) > 1:
            _, gone = self._scopes.popitem(last=False)
            total -= gone.size

    def forget_scope(self, tenant: str, user: str) -> None:
        self._scopes.pop((tenant, user), None)


def keyword_scores(
    scope: _ScopeIndex, terms: Sequence[str], periods: Sequence[Period] = (), k: int = CANDIDATES
) -> tuple[dict[int, float], list[int]]:
    """The BM25 top-``k`` (id → raw score) and the fragments created in the ``periods`` the query names."""
    bm25 = scope.bm25.scores(list(terms), limit=k)
    dated = [i for p in periods for i in scope.created_between(*epoch_range(p), PERIOD_CANDIDATES)]
    return bm25, dated


async def vector_scores(
    scope: _ScopeIndex, query_vector: np.ndarray, also: Sequence[int], k: int = CANDIDATES
) -> dict[int, float]:
    """Cosines of the vector top-``k`` and of the fragments in ``also`` (the other candidates)."""
    query = np.asarray(query_vector, dtype=np.float32)
    matrix, ids = scope.snapshot()
    if len(ids) <= INLINE_ROWS:
        vector = nearest(matrix, ids, query, k)
    else:  # ~15 ms at 100k vectors: off the event loop
        vector = await asyncio.to_thread(nearest, matrix, ids, query, k)
    vector.update(scope.cosines([i for i in dict.fromkeys(also) if i not in vector], query))
    return vector


def epoch_range(period: Period) -> tuple[float, float]:
    """A period's days as UTC epoch seconds, widened by ``PERIOD_SLACK_S`` on each side."""
    first = dt.datetime.combine(period[0], dt.time.min, dt.UTC).timestamp()
    last = dt.datetime.combine(period[1] + dt.timedelta(days=1), dt.time.min, dt.UTC).timestamp()
    return first - PERIOD_SLACK_S, last + PERIOD_SLACK_S


def day_of(timestamp: float) -> str:
    """The UTC day of ``timestamp``, YYYY-MM-DD."""
    return _day(int(timestamp // 86_400))


@functools.lru_cache(maxsize=4096)
def _day(days: int) -> str:
    return (_EPOCH + dt.timedelta(days=days)).strftime("%Y-%m-%d")


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
