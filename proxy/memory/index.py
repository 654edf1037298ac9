"""The memory index: indexing fragments after a response, hybrid search on the request path.

Blocking work (embedding, SQLite) runs off the event loop: embeddings on one
dedicated thread (torch parallelises inside it), SQLite through the store's
own threads. The BM25 side is an in-memory index per scope (tenant + user),
loaded incrementally from the stored terms, so a search touches only the
documents that share a term with the query.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from ..store.fragments import Fragment, FragmentStore, NewFragment
from ..tokens import TokenCounter
from .embedder import Embedder
from .fusion import Floor, Scored, fuse
from .query import fragment_hash
from .redaction import redact
from .textindex import BM25Index, tokenize

# How many candidates each retriever contributes before fusion.
CANDIDATES = 50


@dataclass
class _ScopeIndex:
    bm25: BM25Index[int] = field(default_factory=BM25Index)
    last_id: int = 0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


@dataclass(frozen=True)
class Hit:
    fragment: Fragment
    scored: Scored[int]


class FragmentIndex:
    def __init__(self, store: FragmentStore, embedder: Embedder, counter: TokenCounter) -> None:
        self.store = store
        self.embedder = embedder
        self.counter = counter
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="paperclip-embed")
        self._scopes: dict[tuple[str, str], _ScopeIndex] = {}

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, self.embedder.embed, list(texts))

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

    async def _scope(self, tenant: str, user: str) -> _ScopeIndex:
        key = (tenant, user)
        scope = self._scopes.get(key)
        if scope is None:
            scope = self._scopes[key] = _ScopeIndex()
        async with scope.lock:
            rows = await self.store.terms_since(tenant, user, scope.last_id)
            for doc_id, terms in rows:
                scope.bm25.add(doc_id, terms.split())
                scope.last_id = max(scope.last_id, doc_id)
        return scope

    def forget_scope(self, tenant: str, user: str) -> None:
        self._scopes.pop((tenant, user), None)

    async def raw_scores(
        self, tenant: str, user: str, query_vector: np.ndarray, terms: Sequence[str], k: int = CANDIDATES
    ) -> tuple[dict[int, float], dict[int, float]]:
        """(cosine, BM25) of the fragment candidates: vector top-k ∪ BM25 top-k, cosine known for all."""
        scope = await self._scope(tenant, user)
        bm25 = scope.bm25.scores(list(terms), limit=k)
        vector = dict(await self.store.knn(tenant, user, query_vector, k))
        missing = [i for i in bm25 if i not in vector]
        for doc_id, vec in (await self.store.vectors(missing)).items():
            vector[doc_id] = float(np.dot(vec, query_vector))
        return vector, bm25

    async def search(
        self,
        tenant: str,
        user: str,
        query: str,
        *,
        vector_weight: float,
        bm25_weight: float,
        floor: Floor,
        exclude_hashes: frozenset[str] = frozenset(),
        session: str | None = None,
        k: int = CANDIDATES,
    ) -> list[Hit]:
        """Fused fragment hits, best first, irrelevant ones dropped by ``floor``."""
        qvec = (await self.embed([query]))[0]
        vector, bm25 = await self.raw_scores(tenant, user, qvec, tokenize(query), k)
        ranked = fuse(vector, bm25, vector_weight, bm25_weight, floor=floor)
        fragments = await self.store.get(tenant, user, [s.id for s in ranked])
        hits = []
        for scored in ranked:
            frag = fragments.get(scored.id)
            if frag is not None and usable(frag, exclude_hashes, session):
                hits.append(Hit(frag, scored))
        return hits


def usable(frag: Fragment, exclude_hashes: frozenset[str], session: str | None) -> bool:
    """Not in the verbatim window, and in the session when memory is session-scoped."""
    return frag.hash not in exclude_hashes and (session is None or frag.session == session)


def day_of(timestamp: float) -> str:
    return dt.datetime.fromtimestamp(timestamp, dt.UTC).strftime("%Y-%m-%d")
