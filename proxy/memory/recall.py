"""Recall on the request path: the query, the hybrid search, the cards that fit the budget."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..pipeline import ChatCall
from ..tokens import TokenCounter
from .cards import Card, CardSource, pack, render_block
from .fusion import Floor
from .index import FragmentIndex, Hit, day_of
from .query import build_query, fragment_hash, indexable


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
) -> Recall:
    """What to inject for this request; fragments still in the verbatim ``window`` are never used."""
    mem = call.tenant.settings.memory
    query = build_query(call.messages)
    if not query.strip():
        return Recall(query, [], [], None)
    exclude = frozenset(fragment_hash(role, text) for _, role, text in indexable(window))
    hits = await index.search(
        call.tenant.id,
        call.user,
        query,
        vector_weight=mem.vector_weight,
        bm25_weight=mem.bm25_weight,
        floor=floor,
        exclude_hashes=exclude,
        session=call.session if mem.scope == "session" else None,
    )
    cards = pack((card_of(h) for h in hits), counter, mem.top_k, mem.budget_tokens)
    return Recall(query, hits, cards, render_block(cards) if cards else None)


def card_of(hit: Hit) -> Card:
    frag = hit.fragment
    speaker = "User" if frag.role == "user" else "Assistant"
    source: CardSource = "user said" if frag.role == "user" else "assistant said"
    return Card("fragment", source, day_of(frag.created), f"{speaker}: {frag.text}", f"f{frag.id}")


def candidate(hit: Hit) -> dict[str, Any]:
    """A hit as the trace shows it: raw and normalised scores."""
    s = hit.scored
    return {
        "id": f"f{hit.fragment.id}",
        "kind": "fragment",
        "text": hit.fragment.text[:200],
        "vector": s.vector.raw,
        "vector_norm": s.vector.norm,
        "bm25": s.bm25.raw,
        "bm25_norm": s.bm25.norm,
        "score": s.score,
    }
