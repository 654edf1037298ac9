"""Structured memories: extraction after the response, lifecycle, and their side of the search.

Extraction runs every ``memory.extract_every_messages`` new messages of a
session and on every compression, through the compression model with
``prompts/extract.md``; output that cannot be repaired into items falls back
to the rule-based extractor. Each new item is then deduplicated or
supersedes an older one (``lifecycle.decide``).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..metrics import Metrics
from ..prompts import Prompts
from ..store.interface import Fragments, Items
from ..store.items import ItemRow, NewItem
from .extraction import MemoryItem, parse_items, transcript_for_extraction
from .lifecycle import ExistingItem, decide, is_expired
from .query import fragment_hash
from .redaction import redact
from .rules import rule_extract
from .textindex import BM25Index, tokenize

log = logging.getLogger("paperclip.items")

Embed = Callable[[Sequence[str]], Awaitable[np.ndarray]]
Complete = Callable[[list[dict[str, Any]]], Awaitable[str]]
Turn = tuple[int, str, str]  # (conversation position, role, text)

# A session that arrives with a long history is caught up with the model for
# its latest messages only; older ones go through the rules (cheap, no tokens).
MODEL_CATCH_UP = 40


@dataclass
class ItemScope:
    version: tuple[int, float] = (-1, 0.0)
    rows: list[ItemRow] = field(default_factory=list)
    matrix: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))
    bm25: BM25Index[int] = field(default_factory=BM25Index)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


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
                pairs = await self.store.active_with_vectors(tenant, user)
                scope.rows = [r for r, _ in pairs]
                scope.matrix = (
                    np.vstack([v for _, v in pairs]) if pairs else np.zeros((0, 0), dtype=np.float32)
                )
                scope.bm25 = BM25Index()
                for row in scope.rows:
                    scope.bm25.add(row.id, tokenize(row.content))
                scope.version = version
        return scope

    async def touch(self, tenant: str, user: str, ids: Sequence[int]) -> None:
        await self.store.touch(tenant, user, ids)

    def forget_scope(self, tenant: str, user: str) -> None:
        self._scopes.pop((tenant, user), None)


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


class Extractor:
    def __init__(
        self,
        items: Items,
        fragments: Fragments,
        prompts: Prompts,
        embed: Embed,
        metrics: Metrics,
    ) -> None:
        self.items = items
        self.fragments = fragments
        self.prompts = prompts
        self.embed = embed
        self.metrics = metrics

    async def extract(
        self,
        tenant: str,
        user: str,
        session: str,
        turns: Sequence[Turn],
        complete: Complete | None,
        *,
        pii: str,
        dedup_cosine: float,
        now: dt.datetime | None = None,
    ) -> int:
        """Extract and store memories from ``turns``; returns how many items were added."""
        now = now or dt.datetime.now(dt.UTC)
        # Nothing unmasked reaches the model or the store; source hashes use the originals.
        masked = [(p, role, redact(text, pii) if pii != "keep" else text) for p, role, text in turns]
        found = rule_extract(_numbered(masked[:-MODEL_CATCH_UP]), now)
        found += await self._from_model(masked[-MODEL_CATCH_UP:], complete, now)
        added = 0
        for item in found:
            added += await self._apply(tenant, user, session, item, turns, dedup_cosine)
        return added

    async def _from_model(
        self, turns: Sequence[Turn], complete: Complete | None, now: dt.datetime
    ) -> list[MemoryItem]:
        numbered = _numbered(turns)
        if not numbered:
            return []
        parsed: list[MemoryItem] | None = None
        if complete is not None:
            prompt = self.prompts.render(
                "extract", transcript=transcript_for_extraction(numbered), now=now.date().isoformat()
            )
            try:
                parsed = parse_items(await complete([{"role": "user", "content": prompt}]))
            except Exception as exc:
                log.warning("memory extraction model failed, using the rules: %r", exc)
        if parsed is None:
            items = rule_extract(numbered, now)
            self.metrics.memories_extracted.labels("rules").inc(len(items))
            return items
        self.metrics.memories_extracted.labels("model").inc(len(parsed))
        return parsed

    async def _apply(
        self,
        tenant: str,
        user: str,
        session: str,
        item: MemoryItem,
        turns: Sequence[Turn],
        dedup_cosine: float,
    ) -> int:
        vector = (await self.embed([item.content]))[0]
        existing = await self.items.active_with_vectors(tenant, user)
        known = [ExistingItem(str(r.id), r.key, r.content, v, r.status) for r, v in existing]
        decision = decide(item, vector, known, dedup_cosine)
        if decision.action == "merge":
            await self.items.merge(tenant, user, int(decision.target_ids[0]))
            return 0
        new = NewItem(
            type=item.type,
            key=item.key,
            content=item.content,
            terms=" ".join(tokenize(item.content)),
            importance=item.importance,
            confidence=item.confidence,
            source=item.source,
            expires_at=item.expires_at,
            turns=list(item.turns),
            fragment_hashes=_sources(item, turns),
        )
        old = [int(i) for i in decision.target_ids] if decision.action == "supersede" else []
        await self.items.add(tenant, user, session, new, vector, supersedes=old)
        if old:
            # Neither a superseded fact nor the turns it came from may be injected again.
            rows = await self.items.get(tenant, user, old)
            hashes = [h for r in rows.values() for h in r.fragment_hashes]
            await self.fragments.suppress(tenant, user, hashes)
        return 1


def _numbered(turns: Sequence[Turn]) -> list[Turn]:
    """Turns as the prompt numbers them: 1-based conversation positions."""
    return [(p + 1, role, text) for p, role, text in turns]


def _sources(item: MemoryItem, turns: Sequence[Turn]) -> list[str]:
    by_turn = {p + 1: (role, text) for p, role, text in turns}
    return [fragment_hash(*by_turn[t]) for t in item.turns if t in by_turn]
