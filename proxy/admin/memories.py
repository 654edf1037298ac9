"""Managing one user's memories: list, search, add by hand, delete, export, forget, import.

Shared by the admin endpoints and the ``paperclip memories`` command; both
hand in the store, an ``embed`` function and the in-memory indexes to drop
when a user is forgotten.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from ..errors import BadRequest
from ..memory.bm25 import BM25Index, tokenize
from ..memory.extraction import TYPES, MemoryItem, MemoryType, derive_key
from ..memory.fusion import Floor, fuse
from ..memory.lifecycle import expiry_epoch, expiry_moment
from ..memory.redaction import redact
from ..memory.remember import remember
from ..store import Store
from ..store.item_rows import ItemRow
from .portable import read_export

Embed = Callable[[Sequence[str]], Awaitable[np.ndarray]]
ForgetScope = Callable[[str, str], None]
Settle = Callable[[], Awaitable[None]]

# sqlite-vec answers at most this many neighbours per query.
MAX_KNN = 4096
SEARCH_LIMIT = 20
MAX_CONTENT_CHARS = 4000
NEW_MEMORY_FIELDS = frozenset({"content", "type", "key", "importance", "expires_at"})


@dataclass(frozen=True)
class Added:
    """What adding a memory by hand did: ``added``, ``merged`` into an existing one, or ``superseded``."""

    action: str
    item: ItemRow
    superseded: tuple[int, ...] = ()


@dataclass(frozen=True)
class Found:
    item: ItemRow
    score: float
    vector: float | None
    bm25: float | None


class MemoryAdmin:
    """``forget_scopes`` drop a user's in-memory indexes; ``settle`` lets pending work land first."""

    def __init__(
        self,
        store: Store,
        embed: Embed,
        forget_scopes: Sequence[ForgetScope] = (),
        settle: Settle | None = None,
    ) -> None:
        self.store = store
        self.embed = embed
        self.forget_scopes = forget_scopes
        self.settle = settle

    async def items(self, tenant: str, user: str, *, include_inactive: bool = False) -> list[ItemRow]:
        return await self.store.items.all(tenant, user, include_inactive=include_inactive)

    async def search(
        self,
        tenant: str,
        user: str,
        query: str,
        *,
        include_inactive: bool = False,
        weights: tuple[float, float] = (0.6, 0.4),
        limit: int = SEARCH_LIMIT,
    ) -> list[Found]:
        """Hybrid search over the user's items: cosine + BM25, plus any item containing ``query``.

        Every item of the user gets its cosine (the k-NN covers them all), so the
        relevance floor judges each one; a literal substring match always counts.
        """
        rows = {r.id: r for r in await self.items(tenant, user, include_inactive=include_inactive)}
        if not rows or not query.strip():
            return []
        qvec = (await self.embed([query]))[0]
        k = min(MAX_KNN, await self._item_count(tenant, user))
        vector = {i: s for i, s in await self.store.items.knn(tenant, user, qvec, k) if i in rows}
        literal = {i for i, r in rows.items() if _contains(r, query)}
        bm25 = {**dict.fromkeys(literal, 0.0), **_bm25(rows.values(), query)}
        floor = Floor().for_query(query)
        fused = fuse(vector, bm25, weights[0], weights[1])
        found = [
            Found(rows[s.id], s.score, s.vector.raw, s.bm25.raw)
            for s in (fused.scored(i) for i in range(len(fused)))
            if s.id in literal or floor.passes(s.vector.raw, s.bm25.raw)
        ]
        return found[:limit]

    async def _item_count(self, tenant: str, user: str) -> int:
        count, _ = await self.store.items.version(tenant, user)
        return max(count, 1)

    async def add(
        self, tenant: str, user: str, body: Any, *, pii: str, dedup_cosine: float
    ) -> Added:
        """Store a memory written by hand, through the same dedup and conflict rules as extraction."""
        item = new_memory(body, pii)
        done = await remember(self.store.items, self.embed, tenant, user, None, item, dedup_cosine=dedup_cosine)
        row = (await self.store.items.get(tenant, user, [done.item_id]))[done.item_id]
        return Added(done.action, row, done.superseded)

    async def delete(self, tenant: str, user: str, item_id: int) -> bool:
        deleted = await self.store.items.delete(tenant, user, item_id)
        if deleted:
            await self.store.users.checkpoint()
        return deleted

    async def export(self, tenant: str, user: str) -> dict[str, Any]:
        return await self.store.users.export(tenant, user)

    async def forget(self, tenant: str, user: str) -> dict[str, int]:
        if self.settle is not None:
            await self.settle()
        counts = await self.store.users.forget(tenant, user)
        for forget_scope in self.forget_scopes:
            forget_scope(tenant, user)
        return counts

    async def restore(self, tenant: str, user: str, raw: Any, *, pii: str) -> dict[str, int]:
        """Import an export (``portable.read_export`` validates it) with vectors recomputed.

        Text is masked again under the receiving tenant's ``pii`` setting, which
        may be stricter than the one the export was written under.
        """
        data = read_export(raw)
        for item in data["items"]:
            item["content"] = _mask(item["content"], pii)
            item["terms"] = " ".join(tokenize(item["content"]))
            item["expires"] = expiry_epoch(item["expires_at"])
        for fragment in data["fragments"]:
            fragment["text"] = _mask(fragment["text"], pii)
            fragment["terms"] = " ".join(tokenize(fragment["text"]))
        item_vectors = await self._vectors([i["content"] for i in data["items"]])
        fragment_vectors = await self._vectors([f["text"] for f in data["fragments"]])
        return await self.store.users.restore(tenant, user, data, item_vectors, fragment_vectors)

    async def _vectors(self, texts: list[str]) -> np.ndarray:
        return await self.embed(texts) if texts else np.zeros((0, 1), dtype=np.float32)


def new_memory(body: Any, pii: str) -> MemoryItem:
    """Validate the body of ``POST .../memories``; raises ``BadRequest`` naming the field."""
    if not isinstance(body, dict):
        raise BadRequest("The request body must be a JSON object.")
    unknown = sorted(set(body) - NEW_MEMORY_FIELDS)
    if unknown:
        raise BadRequest(f"Unknown field {unknown[0]!r}.", param=unknown[0])
    content = _mask(" ".join(_text(body, "content", required=True).split()), pii)
    if not content or len(content) > MAX_CONTENT_CHARS:
        raise BadRequest(f"'content' must hold 1 to {MAX_CONTENT_CHARS} characters.", param="content")
    kind = _text(body, "type") or "entity"
    if kind not in TYPES:
        raise BadRequest(f"'type' must be one of {', '.join(sorted(TYPES))}.", param="type")
    return MemoryItem(
        type=cast(MemoryType, kind),
        content=content,
        key=_key(_text(body, "key")) or derive_key(kind, content),
        importance=_importance(body.get("importance", 0.5)),
        confidence=1.0,
        source="user-stated",
        expires_at=_expires(body.get("expires_at")),
    )


def _text(body: Mapping[str, Any], name: str, *, required: bool = False) -> str:
    value = body.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise BadRequest(f"'{name}' must be a non-empty string.", param=name)
    return value.strip()


def _key(value: str) -> str:
    # The slot convention of extraction (``user.allergy.peanut``): lower case, dots, underscores.
    text = re.sub(r"[\s-]+", "_", value.lower())
    return re.sub(r"\.{2,}", ".", re.sub(r"[^\w.]", "", text)).strip("._")[:200]


def _importance(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise BadRequest("'importance' must be a number from 0 to 1.", param="importance")
    return float(value)


def _expires(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or expiry_moment(value) is None:
        raise BadRequest("'expires_at' must be an ISO 8601 date or date-time.", param="expires_at")
    return value.strip()


def _mask(text: str, pii: str) -> str:
    return text if pii == "keep" else redact(text, pii)


def _bm25(rows: Iterable[ItemRow], query: str) -> dict[int, float]:
    index: BM25Index[int] = BM25Index()
    for row in rows:
        index.add(row.id, tokenize(row.content))
    return index.scores(tokenize(query))


def _contains(row: ItemRow, query: str) -> bool:
    needle = query.strip().casefold()
    return needle in row.content.casefold() or needle in row.key.casefold()
