"""Recall on the request path: the query, one hybrid ranking, the cards that fit the budget.

Fragments and structured items are candidates of one ranking: their raw
cosine and BM25 scores are normalised together and fused with the tenant's
weights, so an item competes with the turns it came from on equal terms.
Three steps follow the fusion, each measured on LoCoMo (docs/retrieval.md):

- the query is *focused* first: names found all over the user's history
  (the participants') are left out of what is embedded and matched;
- a fragment said in a period the query names ("on 3 May, 2023") gets
  ``PERIOD_BONUS``, and every fragment inherits ``NEIGHBOUR_WEIGHT`` of its
  best adjacent turn's score, so an exchange outranks an isolated greeting;
- adjacent fragments chosen for the block merge into one card (an excerpt
  of the conversation with one header), which spends the budget on turns
  rather than on headers.

Nothing is injected unless one of the best candidates clears the relevance
``Floor`` on raw scores; past that gate the ranking fills the budget.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from ..pipeline.call import ChatCall
from ..store.fragments import Fragment
from ..store.item_rows import ItemRow
from ..tokens import TokenCounter
from .bm25 import tokenize
from .cards import MIN_TRUNCATED_TOKENS, Card, CardSource, pack, render_block, render_card
from .fragment_search import (
    CANDIDATES,
    FragmentIndex,
    day_of,
    epoch_range,
    keyword_scores,
    vector_scores,
)
from .fusion import Floor, Fused, Normalisation, Scored, fuse_arrays
from .item_search import ItemCandidates, ItemIndex, item_candidates
from .query import Period, build_query, focus, fragment_hash, indexable, periods_in

Key = tuple[Literal["f", "i"], int]

# Normalisation of each signal over the candidates before fusion. Min-max for
# both: "max" for BM25 (the weakest match keeps a share) let keyword matches on
# one common word crowd out semantic hits — 1.8 points fewer of the evidence
# in one-chat mode on LoCoMo; "max" for cosines changed nothing.
VECTOR_NORM: Normalisation = "minmax"
BM25_NORM: Normalisation = "minmax"
# Added to the fused score of a fragment said within a period the query names.
PERIOD_BONUS = 0.3
# Share of its best adjacent turn's score that a fragment inherits.
NEIGHBOUR_WEIGHT = 0.3
# The relevance gate looks at this many of the best fused candidates.
GATE_DEPTH = 10
# Ranked candidates kept in the trace (and read by the eval's recall@k).
TRACE_HITS = 50
# Packing stops scanning after this many candidates, or when less room is left.
SCAN_LIMIT = 120
MIN_ROOM = 12
# A turn adds at least its own tokens less this to any card it joins (the
# tokenizer may merge across the line's start): packing skips a turn longer
# than the room left without rendering and counting its card.
SLACK = 2


@dataclass(frozen=True)
class Hit:
    """One ranked candidate: a fragment or an item, with its scores.

    ``scored`` holds the fusion (raw and normalised parts); ``score`` is the
    final rank score: fused + period bonus + neighbour support.
    """

    scored: Scored[Key]
    fragment: Fragment | None = None
    item: ItemRow | None = None
    score: float = 0.0
    dated: bool = False

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
    focused: str = ""  # the query as searched (participants' names left out)


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
    scope = index.cached(tenant, user) or await index.scope(tenant, user)
    focused = focus(query, scope.is_common)
    terms = tokenize(focused)
    periods = periods_in(query)
    # The query's embedding (~5 ms on a worker thread) overlaps everything
    # that does not need it: reading what was stored since, keyword search.
    embedding = asyncio.ensure_future(index.embed_query(focused))
    try:
        scope, item_scope = await asyncio.gather(
            index.scope(tenant, user), items.scope(tenant, user) if items else _no_items()
        )
        bm25_f, dated = keyword_scores(scope, terms, periods)
        qvec = await embedding
    finally:
        if not embedding.done():
            embedding.cancel()
    vector_f = await vector_scores(scope, qvec, [*bm25_f, *dated])
    item_found = item_candidates(item_scope, qvec, terms, CANDIDATES) if item_scope else NO_ITEMS
    vector: dict[Key, float] = {("f", i): s for i, s in vector_f.items()}
    bm25: dict[Key, float] = {("f", i): s for i, s in bm25_f.items()}
    vector.update({("i", i): s for i, s in item_found.vector.items()})
    bm25.update({("i", i): s for i, s in item_found.bm25.items()})
    fused = fuse_arrays(
        vector, bm25, mem.vector_weight, mem.bm25_weight, vector_norm=VECTOR_NORM, bm25_norm=BM25_NORM
    )
    exclude = frozenset(fragment_hash(role, text) for _, role, text in indexable(window))
    session = call.session if mem.scope == "session" else None
    cands = candidates(fused, scope.fragments, item_found.rows, exclude, session)
    if not relevant(cands, fused, floor):
        hits = [Hit(fused.scored(c.at), c.fragment, c.item, c.score) for c in cands[:TRACE_HITS]]
        return Recall(query, hits, [], None, focused)
    ranking = rank(cands, periods, SCAN_LIMIT)
    ranked = [Hit(fused.scored(c.at), c.fragment, c.item, score, dated) for c, score, dated in ranking]
    cards = select(ranked, counter, mem.top_k, mem.budget_tokens)
    if items is not None:
        await items.touch(tenant, user, [int(c.id[1:]) for c in cards if c.id.startswith("i")])
    return Recall(query, ranked[:TRACE_HITS], cards, render_block(cards) if cards else None, focused)


NO_ITEMS = ItemCandidates({}, {}, {})


async def _no_items() -> None:
    return None


class Candidate(NamedTuple):
    """A fused candidate this request may use: its place in the fusion, its fused score, what it is."""

    at: int
    score: float
    fragment: Fragment | None
    item: ItemRow | None


def candidates(
    fused: Fused[Key],
    meta: Mapping[int, Fragment],
    rows: Mapping[int, ItemRow],
    exclude: frozenset[str],
    session: str | None,
) -> list[Candidate]:
    """The usable fused candidates, in fused order."""
    out = []
    scores = fused.score
    for at, (kind, number) in enumerate(fused.keys):
        if kind == "f":
            frag = meta.get(number)
            if frag is not None and frag.hash not in exclude and (session is None or frag.session == session):
                out.append(Candidate(at, scores[at], frag, None))
        else:
            row = rows.get(number)
            if row is not None and (session is None or row.session == session):
                out.append(Candidate(at, scores[at], None, row))
    return out


# --- ranking (pure) ------------------------------------------------------------------


def relevant(cands: Sequence[Candidate], fused: Fused[Key], floor: Floor) -> bool:
    """Whether one of the ``GATE_DEPTH`` best fused candidates clears the floor.

    The floor gates the query, not each candidate: normalised scores cannot
    say "nothing here is relevant", raw ones can; but once something is, the
    turns ranked right after it are the best use of the budget even when
    their own raw scores are weak (dropping them cost 8 points of evidence
    recall on LoCoMo).
    """
    return any(
        floor.passes(fused.vector_raw[c.at], fused.bm25_raw[c.at]) for c in cands[:GATE_DEPTH]
    )


def rank(
    cands: Sequence[Candidate], periods: Sequence[Period], limit: int | None = None
) -> list[tuple[Candidate, float, bool]]:
    """(candidate, final score, dated) best first, at most ``limit``; a non-positive final score is dropped.

    Final = fused score, + ``PERIOD_BONUS`` when said in a period the query
    names (dated), + ``NEIGHBOUR_WEIGHT`` × the best adjacent candidate's.
    """
    spans = [epoch_range(p) for p in periods]
    dated = [bool(spans) and c.fragment is not None and _within(c.fragment.created, spans)
             for c in cands]
    base = [c.score + (PERIOD_BONUS if d else 0.0) for c, d in zip(cands, dated, strict=True)]
    final = supported_by_neighbours(cands, base)
    order = sorted(range(len(cands)), key=lambda j: -final[j])  # stable: ties keep the fused order
    out = []
    for j in order[:limit]:
        if final[j] <= 0:
            break
        out.append((cands[j], final[j], dated[j]))
    return out


def supported_by_neighbours(cands: Sequence[Candidate], base: Sequence[float]) -> list[float]:
    """Each base score plus ``NEIGHBOUR_WEIGHT`` × the best base score among its adjacent candidates.

    Adjacent: fragments of the same session, positions one apart. A turn next
    to a strong hit is likely part of the same exchange (the question before
    the answer), so it inherits part of that hit's score; items and isolated
    turns keep their own.
    """
    at = {(c.fragment.session, c.fragment.position): j for j, c in enumerate(cands) if c.fragment}
    out = list(base)
    for (session, position), j in at.items():
        best = 0.0
        for n in (at.get((session, position - 1)), at.get((session, position + 1))):
            if n is not None and base[n] > best:
                best = base[n]
        out[j] = base[j] + NEIGHBOUR_WEIGHT * best
    return out


def _within(timestamp: float, spans: Sequence[tuple[float, float]]) -> bool:
    return any(a <= timestamp <= b for a, b in spans)


# --- packing -------------------------------------------------------------------------


@dataclass(frozen=True)
class Excerpt:
    """Cards in the making: one item, or adjacent fragments of one session and day."""

    lead: Hit  # the best-ranked member: it gives the card its source
    members: tuple[Hit, ...]  # fragments in conversation order; (lead,) for an item

    def card(self) -> Card:
        if self.lead.item is not None:
            return card_of(self.lead)
        lines = [_line(h.fragment) for h in self.members if h.fragment]
        first = self.members[0].fragment
        assert first is not None
        ids = ",".join(h.id for h in self.members)
        return Card("fragment", _source(self.lead), day_of(first.created), "\n".join(lines), ids)


def select(ranked: Sequence[Hit], counter: TokenCounter, top_k: int, budget: int) -> list[Card]:
    """The cards to inject: best hits first, adjacent fragments merged, within ``budget`` tokens.

    At most ``top_k`` cards. A hit that does not fit whole is skipped for a
    later, shorter one, so a turn is never cut short for want of room — except
    a single fragment longer than half the budget, which ``pack`` truncates.
    """
    cap = max(budget // 2, MIN_TRUNCATED_TOKENS)
    costs: dict[tuple[str, ...], int] = {}

    def cost(ex: Excerpt) -> int:
        key = tuple(h.id for h in ex.members)
        if key not in costs:
            costs[key] = counter.text(render_card(ex.card()) + "\n")
        return costs[key]

    base = counter.text(render_block([]))
    chosen: list[Excerpt] = []
    used = base
    edges: frozenset[tuple[str, float, int]] = frozenset()  # where a turn would join ``chosen``
    for hit in ranked[:SCAN_LIMIT]:
        if budget - used < MIN_ROOM:
            break
        frag = hit.fragment
        if frag is not None and min(frag.tokens - SLACK, cap) > budget - used:
            continue  # its own text is too long for the room left, alone or joined to an excerpt
        if len(chosen) >= top_k and (frag is None or _edge(frag) not in edges):
            continue  # no room for another card, and it joins none (what place() would find, faster)
        trial = place(chosen, hit)
        if trial is None or len(trial) > top_k:
            continue
        sizes = [cost(ex) for ex in trial]
        if any(s > cap and len(ex.members) > 1 for s, ex in zip(sizes, trial, strict=True)):
            continue  # never let pack() cut an excerpt's later turns
        total = base + sum(min(s, cap) for s in sizes)
        if total <= budget:
            chosen, used = trial, total
            edges = _edges(chosen)
    return pack((ex.card() for ex in chosen), counter, top_k, budget)


def _edges(chosen: Sequence[Excerpt]) -> frozenset[tuple[str, float, int]]:
    """(session, day, position) of the turns right before and after each excerpt: where ``place`` joins."""
    out = set()
    for ex in chosen:
        first, last = ex.members[0].fragment, ex.members[-1].fragment
        if first is not None and last is not None:
            out.add(_edge(first, -1))
            out.add(_edge(last, 1))
    return frozenset(out)


def _edge(frag: Fragment, offset: int = 0) -> tuple[str, float, int]:
    return (frag.session, frag.created // 86_400, frag.position + offset)


def place(chosen: Sequence[Excerpt], hit: Hit) -> list[Excerpt] | None:
    """``chosen`` with ``hit`` added: joined to the excerpts it touches, or as a new one.

    None when the hit is already in an excerpt.
    """
    frag = hit.fragment
    if frag is None:
        return [*chosen, Excerpt(hit, (hit,))]
    touching = []
    for i, ex in enumerate(chosen):
        first, last = ex.members[0].fragment, ex.members[-1].fragment
        if first is None or last is None or not _same_day(first, frag):
            continue
        if first.position <= frag.position <= last.position:
            return None
        if frag.position in (first.position - 1, last.position + 1):
            touching.append(i)
    if not touching:
        return [*chosen, Excerpt(hit, (hit,))]
    members = sorted(
        [hit, *(m for i in touching for m in chosen[i].members)],
        key=lambda h: h.fragment.position if h.fragment else 0,
    )
    merged = Excerpt(chosen[touching[0]].lead, tuple(members))
    rest = [ex for i, ex in enumerate(chosen) if i not in touching[1:]]
    return [merged if ex is chosen[touching[0]] else ex for ex in rest]


def _same_day(a: Fragment, b: Fragment) -> bool:
    # One card carries one date: a one-chat conversation spans many days.
    return a.session == b.session and a.created // 86_400 == b.created // 86_400


def _line(frag: Fragment | None) -> str:
    assert frag is not None
    return f"{'User' if frag.role == 'user' else 'Assistant'}: {frag.text}"


def _source(hit: Hit) -> CardSource:
    frag = hit.fragment
    return "user said" if frag is not None and frag.role == "user" else "assistant said"


def card_of(hit: Hit) -> Card:
    if hit.item is not None:
        item = hit.item
        said: CardSource = "user said" if item.source == "user-stated" else "inferred"
        return Card(item.type, said, day_of(item.created), item.content, hit.id)  # type: ignore[arg-type]
    return Card("fragment", _source(hit), day_of(_created(hit)), _line(hit.fragment), hit.id)


def _created(hit: Hit) -> float:
    assert hit.fragment is not None
    return hit.fragment.created


def candidate(hit: Hit) -> dict[str, Any]:
    """A hit as the trace shows it: raw and normalised scores, fused and final."""
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
        "fused": s.score,
        "dated": hit.dated,
        "score": hit.score,
    }
