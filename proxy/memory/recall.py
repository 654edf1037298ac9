"""Recall on the request path: the query, the hybrid search, the cards that fit the budget.

Fragments and structured items are candidates of one ranking: their raw
cosine and BM25 scores are normalised together and fused with the tenant's
weights, so an item competes with the turns it came from on equal terms.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..pipeline import ChatCall
from ..store.fragments import Fragment
from ..store.items import ItemRow
from ..tokens import TokenCounter
from .cards import Card, CardSource, pack, render_block
from .fusion import Floor, Scored, fuse
from .index import CANDIDATES, FragmentIndex, day_of, usable
from .items import ItemCandidates, ItemIndex
from .query import build_query, fragment_hash, indexable
from .textindex import tokenize

Key = tuple[Literal["f", "i"], int]


@dataclass(frozen=True)
class Hit:
    """One ranked candidate: a fragment or an item, with its scores."""

    scored: Scored[Key]
    fragment: Fragment | None = None
    item: ItemRow | None = None

    @property
    def id(self) -> str:
        kind, number = self.scored.id
        return f"{kind}{number}"


@dataclass(frozen=True)
class Recall:
    query: str
    hits: list[Hit]
    cards: list[Card]
    block: str | None


async def recall_for(
    index: FragmentIndex,
    call: ChatCall,
    window: Sequence[dict[str, Any]],
    counter: TokenCounter,
    floor: Floor,
    items: ItemIndex | None = None,
) -> Recall:
    """What to inject for this request; fragments still in the verbatim ``window`` are never used."""
    mem = call.tenant.settings.memory
    query = build_query(call.messages)
    if not query.strip():
        return Recall(query, [], [], None)
    tenant, user = call.tenant.id, call.user
    qvec = (await index.embed([query]))[0]
    terms = tokenize(query)
    fragment_scores, item_found = await asyncio.gather(
        index.raw_scores(tenant, user, qvec, terms, CANDIDATES),
        items.candidates(tenant, user, qvec, terms, CANDIDATES) if items else _no_items(),
    )
    vector: dict[Key, float] = {("f", i): s for i, s in fragment_scores[0].items()}
    bm25: dict[Key, float] = {("f", i): s for i, s in fragment_scores[1].items()}
    vector.update({("i", i): s for i, s in item_found.vector.items()})
    bm25.update({("i", i): s for i, s in item_found.bm25.items()})
    ranked = fuse(vector, bm25, mem.vector_weight, mem.bm25_weight, floor=floor)
    exclude = frozenset(fragment_hash(role, text) for _, role, text in indexable(window))
    session = call.session if mem.scope == "session" else None
    hits = await _resolve(index, tenant, user, ranked, item_found, exclude, session)
    cards = pack((card_of(h) for h in hits), counter, mem.top_k, mem.budget_tokens)
    if items is not None:
        await items.touch(tenant, user, [int(c.id[1:]) for c in cards if c.id.startswith("i")])
    return Recall(query, hits, cards, render_block(cards) if cards else None)


async def _no_items() -> ItemCandidates:
    return ItemCandidates({}, {}, {})


async def _resolve(
    index: FragmentIndex,
    tenant: str,
    user: str,
    ranked: list[Scored[Key]],
    item_found: ItemCandidates,
    exclude: frozenset[str],
    session: str | None,
) -> list[Hit]:
    fragments = await index.store.get(tenant, user, [n for kind, n in (s.id for s in ranked) if kind == "f"])
    hits = []
    for scored in ranked:
        kind, number = scored.id
        if kind == "f":
            frag = fragments.get(number)
            if frag is not None and usable(frag, exclude, session):
                hits.append(Hit(scored, fragment=frag))
        else:
            row = item_found.rows.get(number)
            if row is not None and (session is None or row.session == session):
                hits.append(Hit(scored, item=row))
    return hits


def card_of(hit: Hit) -> Card:
    if hit.item is not None:
        item = hit.item
        said: CardSource = "user said" if item.source == "user-stated" else "inferred"
        return Card(item.type, said, day_of(item.created), item.content, hit.id)  # type: ignore[arg-type]
    frag = hit.fragment
    assert frag is not None
    speaker = "User" if frag.role == "user" else "Assistant"
    source: CardSource = "user said" if frag.role == "user" else "assistant said"
    return Card("fragment", source, day_of(frag.created), f"{speaker}: {frag.text}", hit.id)


def candidate(hit: Hit) -> dict[str, Any]:
    """A hit as the trace shows it: raw and normalised scores."""
    s = hit.scored
    text = hit.item.content if hit.item is not None else hit.fragment.text if hit.fragment else ""
    return {
        "id": hit.id,
        "kind": hit.item.type if hit.item is not None else "fragment",
        "text": text[:200],
        "vector": s.vector.raw,
        "vector_norm": s.vector.norm,
        "bm25": s.bm25.raw,
        "bm25_norm": s.bm25.norm,
        "score": s.score,
    }
