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
import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ...offload import off_loop
from ...store.interface import Fragments
from ...store.records import NewFragment
from ...tokens import TokenCounter
from ..recall.query import Period, fragment_hash
from ..redaction import redact
from .bm25 import tokenize
from .embedder import Cached, Embedder
from .scope_index import ScopeIndex, top_of

# How many candidates each retriever contributes before fusion. Generous on
# purpose: the fused ranking, not either retriever alone, decides what fits
# the budget, and a turn that only one of them ranks ~100th is often the one
# that holds the answer (measured on LoCoMo: docs/recall.md).
CANDIDATES = 200
# Fragments created in a period the query names join the candidates, up to this many.
PERIOD_CANDIDATES = 200
# A period is widened by this much on each side: "on 3 May" asked in another time zone.
PERIOD_SLACK_S = 86_400.0
# The in-memory side of the index (BM25 postings and a float32 matrix of the
# vectors, ~5 kB a fragment in all) is kept for the users searched most
# recently, up to this many fragments; an evicted user is reloaded on their
# next request (~0.3 s per 10k fragments). In memory because sqlite-vec scans
# 100k vectors in ~85 ms where a matrix product takes ~10 ms.
CACHED_FRAGMENTS = 100_000
# Up to this many vectors the k-NN runs on the event loop (~1 ms at 20k);
# past it, in a worker thread.
INLINE_ROWS = 20_000
# After starting a query's embedding, the loop waits up to this long for the
# embedding thread to begin (it lets go of the GIL meanwhile): otherwise the
# thread waits for the loop's keyword search to give up the GIL, up to the
# interpreter's switch interval, before the model even starts.
QUERY_START_WAIT_S = 0.001
_LOAD_BATCH = 5_000


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
        self._scopes: OrderedDict[tuple[str, str], ScopeIndex] = OrderedDict()
        # The fragments the scopes in ``_scopes`` hold, kept as they change: summing them on every
        # search cost ~0.3 ms a request with 10,000 users cached.
        self._cached = 0
        self._held = embedder.cached if isinstance(embedder, Cached) else None
        self._queries = 0  # query embeddings submitted and not yet done (counted on the event loop)

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embeddings for background work (indexing, extraction, admin).

        Texts the embedder still holds (a turn embedded as its request's query a moment ago) are
        answered here, without a thread's round trip; otherwise the model runs on its thread.
        """
        if self._held is not None and texts:
            held = [v for v in map(self._held, texts) if v is not None]
            if len(held) == len(texts):
                return np.vstack(held)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, self.embedder.embed, list(texts))

    def query_vector(self, text: str) -> asyncio.Future[np.ndarray]:
        """One query's embedding on the request path, started at once for the caller to overlap.

        A vector the embedder still holds (``cached``) is answered here, without a thread's round trip.
        Otherwise, when no other query's embedding is under way, this returns once the thread has
        begun (at most ``QUERY_START_WAIT_S``).
        """
        loop = asyncio.get_running_loop()
        held = self._held(text) if self._held is not None else None
        if held is not None:
            done: asyncio.Future[np.ndarray] = loop.create_future()
            done.set_result(held)
            return done
        idle = self._queries == 0  # else the thread is busy with another query: no wait
        self._queries += 1
        started = threading.Event()
        future = loop.run_in_executor(self._query_pool, self._embed_one, text, started)
        future.add_done_callback(self._query_done)
        if idle:
            started.wait(QUERY_START_WAIT_S)
        return future

    def _query_done(self, _: asyncio.Future[np.ndarray]) -> None:
        self._queries -= 1

    def _embed_one(self, text: str, started: threading.Event) -> np.ndarray:
        started.set()
        return np.asarray(self.embedder.embed([text])[0])

    async def index(
        self,
        tenant: str,
        user: str,
        session: str,
        positions: Sequence[tuple[int, str, str]],
        pii: str,
        created: float | None = None,
        *,
        unseen: bool = False,
    ) -> int:
        """Index the messages at ``positions`` (position, role, text) not yet known. Returns how many.

        Known: stored for the user, or purged from this session (a resent
        conversation does not bring back what was forgotten). ``unseen``: the
        conversation never reached these positions before, so the store is not
        asked which of them it knows first (its ``add`` keeps each fragment once all the same).
        """
        hashes = [fragment_hash(role, text) for _, role, text in positions]
        known = set() if unseen else await self.store.known(tenant, user, hashes, session)
        size = sum(len(text) for _, _, text in positions)  # masking, terms, tokens: off the loop when long
        fresh = await off_loop(size, new_fragments, positions, hashes, known, pii, self.counter)
        if not fresh:
            return 0
        vectors = await self.embed([f.text for f in fresh])
        return await self.store.add(tenant, user, session, fresh, vectors, created)

    def cached(self, tenant: str, user: str) -> ScopeIndex | None:
        """The user's in-memory index as it is, if loaded (it may lack the latest fragments)."""
        return self._scopes.get((tenant, user))

    async def scope(self, tenant: str, user: str) -> ScopeIndex:
        """The user's in-memory index, with the fragments stored since it was last read.

        When the scope's generation changed (a forget or a supersede, in this
        process or another), what it holds is brought back to exactly the
        active fragments.
        """
        key = (tenant, user)
        scope = self._scopes.get(key)
        if scope is None:
            scope = self._scopes[key] = ScopeIndex(self.embedder.dim)
        self._scopes.move_to_end(key)
        async with scope.lock:
            current = await self._load(scope, tenant, user)
        if not current:
            # Older fragments went away or were hidden: start again, in a new
            # object (a search already holding the old one finishes with it).
            if self._scopes.get(key) is scope:
                self._cached -= scope.size
                self._scopes[key] = ScopeIndex(self.embedder.dim)
            return await self.scope(tenant, user)
        self._evict()
        return scope

    async def _load(self, scope: ScopeIndex, tenant: str, user: str) -> bool:
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
            if self._scopes.get((tenant, user)) is scope:  # not dropped while the rows were read
                self._cached += len(rows)
            if len(rows) < _LOAD_BATCH:
                return True

    @property
    def cached_fragments(self) -> int:
        """How many fragments the users' in-memory indexes hold."""
        return self._cached

    def _evict(self) -> None:
        """Drop the least recently searched users while over ``CACHED_FRAGMENTS`` (never the latest)."""
        while self._cached > CACHED_FRAGMENTS and len(self._scopes) > 1:
            _, gone = self._scopes.popitem(last=False)
            self._cached -= gone.size

    def forget_scope(self, tenant: str, user: str) -> None:
        gone = self._scopes.pop((tenant, user), None)
        if gone is not None:
            self._cached -= gone.size


def new_fragments(
    positions: Sequence[tuple[int, str, str]], hashes: Sequence[str], known: set[str], pii: str, counter: TokenCounter
) -> list[NewFragment]:
    """The turns not ``known`` (each once), masked, with their BM25 terms and tokens."""
    fresh: list[NewFragment] = []
    seen: set[str] = set()
    for (position, role, text), h in zip(positions, hashes, strict=True):
        if h in known or h in seen:
            continue
        seen.add(h)
        clean = redact(text, pii) if pii != "keep" else text
        terms = " ".join(tokenize(clean))
        fresh.append(NewFragment(h, role, clean, terms, position, counter.text(clean)))
    return fresh


def keyword_scores(
    scope: ScopeIndex, terms: Sequence[str], periods: Sequence[Period] = (), k: int = CANDIDATES
) -> tuple[dict[int, float], list[int]]:
    """The BM25 top-``k`` (id → raw score) and the fragments created in the ``periods`` the query names."""
    bm25 = scope.bm25.scores(list(terms), limit=k)
    dated = [i for p in periods for i in scope.created_between(*epoch_range(p), PERIOD_CANDIDATES)]
    return bm25, dated


async def vector_scores(
    scope: ScopeIndex, query_vector: np.ndarray, also: Sequence[int], k: int = CANDIDATES
) -> dict[int, float]:
    """Cosines of the vector top-``k`` and of the fragments in ``also`` (the other candidates)."""
    query = np.asarray(query_vector, dtype=np.float32)
    matrix, ids = scope.snapshot()
    # One product of every row (~15 ms at 100k vectors: off the event loop past INLINE_ROWS);
    # the other candidates' cosines are read from it, not computed again.
    sims = matrix @ query if len(ids) <= INLINE_ROWS else await asyncio.to_thread(np.matmul, matrix, query)
    vector = top_of(sims, ids, k)
    vector.update(scope.cosines([i for i in dict.fromkeys(also) if i not in vector], query, sims))
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
