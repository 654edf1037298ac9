"""Recall on the request path: the query, one hybrid ranking, the cards that fit the budget.

Fragments and structured items are candidates of one ranking: their raw
cosine and BM25 scores are normalised together and fused with the tenant's
weights, so an item competes with the turns it came from on equal terms.
Three steps follow the fusion, each measured on LoCoMo (bench/results/2026-12-01-retrieval.md):

- the query is *focused* first: names found all over the user's history
  (the participants') are left out of what is embedded and matched; BM25
  also matches the other -ing / -ed forms of its words, at half weight;
- a fragment said in a period the query names ("on 3 May, 2023") gets
  ``PERIOD_BONUS``; when those names point to one side of the conversation
  (``speakers``), the other side's turns count less; and every fragment
  inherits ``NEIGHBOUR_WEIGHT`` of its best adjacent turn's score, so an
  exchange outranks an isolated greeting, and ``NEARBY_WEIGHT`` of the best
  other turn within ``NEARBY_TURNS`` of its session, so a stretch of
  conversation with a strong hit lends weight to its turns;
- the fragments chosen for the block that lie close together in the user's
  history share a card (excerpts of the conversation under one header, split
  where the date changes), which spends the budget on turns rather than on
  headers; a turn of words common all over the history, or a near-repeat of
  one taken, is left out (``content``). Nearness is counted in turns, never
  in time: recall does not depend on the calendar.

The user's profile of standing facts (``profile``) leads the block on every
request, within ``memory.profile_budget_tokens`` of ``memory.budget_tokens``;
the items it shows are not candidates. Its guesses (facts held with little
confidence) stay only where the hits leave room for them. Nothing else is injected unless one
of the best candidates clears the relevance ``Floor`` on raw scores, or the
question names someone all over the user's history (``names_someone``: a
participant, so it is about that history however vague its other words);
past that gate the ranking fills the rest of the budget.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

from ...config import Memory
from ...message_text import text_of
from ...offload import off_loop
from ...store.records import Fragment, ItemRow
from ...tokens import TokenCounter
from ..search.bm25 import tokenize
from ..search.fragment_index import CANDIDATES, FragmentIndex, keyword_scores, vector_scores
from ..search.fusion import Floor, Normalisation, fuse
from ..search.item_index import ItemCandidates, ItemIndex, ItemScope, item_candidates, session_view
from ..search.scope_index import ScopeIndex
from .cards import Card, card_cost, render_block
from .changed_since import facts_changed_by_turns, turns_changed_later
from .packing import SCAN_LIMIT, select
from .profile import Profile, beyond, profile_of
from .query import (
    Period,
    asked_query,
    focus,
    fragment_hash,
    indexable,
    inflected,
    latest_user_index,
    names_in,
    names_someone,
    periods_in,
)
from .query_rewrite import extended_query
from .question_memo import Asked, QuestionMemo
from .ranking import Candidate, Hit, Hits, Key, boosts, candidates, rank, relevant
from .rerank import Reranker, rerank
from .speakers import Role, speaker_named

# Normalisation of each signal over the candidates before fusion. Min-max for
# both: "max" for BM25 (the weakest match keeps a share) let keyword matches on
# one common word crowd out semantic hits — 1.8 points fewer of the evidence
# in one-chat mode on LoCoMo; "max" for cosines changed nothing.
VECTOR_NORM: Normalisation = "minmax"
BM25_NORM: Normalisation = "minmax"
# Ranked candidates kept in the trace (and read by the eval's recall@k).
TRACE_HITS = 50
# BM25 searches the question's words and their other -ing / -ed forms (``query.inflected``):
# "camped" meets "camping". A word asked counts this many times, each other form once — a
# form is weaker evidence than the word itself (counted once, the forms cost split B).
ASKED_TERM_WEIGHT = 2


@dataclass(frozen=True)
class RecallRequest:
    """What recall needs of one chat request: who asks, what they said, what stays verbatim.

    ``window`` is the part of the conversation forwarded word for word: its
    turns are never injected again. ``now`` (epoch seconds) is the request's
    time, from which the age of a memory is counted. ``held`` is how many of
    the session's first turns the model already has in its context (a
    conversation its provider keeps): neither are they injected.
    """

    tenant: str
    user: str
    session: str
    messages: Sequence[dict[str, Any]]
    window: Sequence[dict[str, Any]]
    settings: Memory
    now: float
    held: int = 0
    rewrite: str | None = None  # the compression model's search line (memory.query_rewrite), if any
    window_hashes: frozenset[str] | None = None  # the window's fragment hashes, when the caller keeps them


@dataclass(frozen=True)
class Recall:
    """What recall found: the ranked hits (for the trace), the cards and their block to inject.

    ``touched`` are the items injected: recall never writes, so the caller
    records their access after the response.
    """

    query: str
    hits: list[Hit]
    cards: list[Card]
    block: str | None
    focused: str = ""  # the query as searched (participants' names left out)
    touched: tuple[int, ...] = ()


async def recall_for(
    index: FragmentIndex,
    request: RecallRequest,
    counter: TokenCounter,
    floor: Floor,
    items: ItemIndex | None = None,
    reranker: Reranker | None = None,
    memo: QuestionMemo[Recall] | None = None,
) -> Recall:
    """What to inject for this request; fragments still in the verbatim ``window`` are never used.

    ``memo``: the session's last recall, shown again while the question stands and every memory it shows
    too (``question_memo``: an agent's tool loop keeps its block)."""
    mem = request.settings
    # A question of megabytes is read off the event loop (``offload``); a chat's, in place.
    latest = latest_user_index(request.messages)
    size = len(text_of(request.messages[latest])) if latest is not None else 0
    asked_at, plain = await off_loop(size, asked_query, request.messages)
    query = extended_query(plain, request.rewrite)
    if not query.strip():
        return Recall(query, [], [], None)
    tenant, user = request.tenant, request.user
    session = (tenant, user, request.session)
    asked = Asked(query, asked_at, mem)
    if memo is not None and (again := memo.last(session, asked)) is not None:
        turns, facts = await asyncio.gather(index.scope(tenant, user), items.scope(tenant, user) if items else _no_items())
        if facts is not None and mem.scope == "session":
            facts = session_view(facts, request.session)
        if memo.holds(session, turns, facts, len(await turns.said_changes()), _window(request), _moment(request.now)):
            return again
    found, read = await _recall(index, request, counter, floor, items, reranker, query)
    if memo is not None:
        memo.keep(session, asked, found.cards, read.turns, read.facts, read.changes, found)
    return found


@dataclass(frozen=True)
class _Read:
    """The user's scopes as a recall read them, and how many of her turns said a change then."""

    turns: ScopeIndex
    facts: ItemScope | None
    changes: int


def _window(request: RecallRequest) -> frozenset[str]:
    """The fragment hashes of the request's verbatim window: its turns are never injected again."""
    if request.window_hashes is not None:
        return request.window_hashes
    return frozenset(fragment_hash(role, text) for _, role, text in indexable(request.window))


async def _recall(
    index: FragmentIndex, request: RecallRequest, counter: TokenCounter, floor: Floor, items: ItemIndex | None,
    reranker: Reranker | None, query: str,
) -> tuple[Recall, _Read]:
    """``recall_for``'s search, with the user's scopes as it read them."""
    mem = request.settings
    tenant, user = request.tenant, request.user
    scope = index.cached(tenant, user) or await index.scope(tenant, user)
    focused = await off_loop(len(query), focus, query, scope.is_common)
    # The query's embedding (~5 ms on a worker thread) starts first and overlaps
    # everything that does not need it: what was stored since, keyword search,
    # the profile, who the question is about, what the window excludes.
    embedding = index.query_vector(focused)
    try:
        terms, periods = await off_loop(len(query), _terms, focused, query)
        scope, item_scope = await asyncio.gather(
            index.scope(tenant, user), items.scope(tenant, user) if items else _no_items()
        )
        bm25_f, dated = keyword_scores(scope, terms, periods)
        said = await scope.said_changes()
        read = _Read(scope, item_scope, len(said))
        session = request.session if mem.scope == "session" else None
        if session is not None:  # ``memory.scope: session``: what other sessions said neither shows nor marks
            item_scope = session_view(item_scope, session) if item_scope is not None else None
            said = [(h, t) for h, t in said if t.session == session]
        # The profile leads the block whatever the question; its facts are never repeated below it.
        profile = _profile(item_scope, scope, said, mem, counter, _moment(request.now))
        speaker, about_someone = await off_loop(len(query), _who, query, scope)
        exclude = _window(request)
        if item_scope is not None and item_scope.changed_turns:  # those of facts a later one may have changed
            exclude = exclude | item_scope.changed_turns
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
    boost = boosts(
        vector.keys() | bm25.keys(), scope.fragments, item_found.rows, request.now,
        mem.recency_half_life_days, mem.importance_weight,
    )
    fused = fuse(
        vector, bm25, mem.vector_weight, mem.bm25_weight, vector_norm=VECTOR_NORM, bm25_norm=BM25_NORM, boost=boost
    )
    shown_or_changed = profile.item_ids | profile.changed
    cands = [
        c for c in candidates(fused, scope.fragments, item_found.rows, exclude, session)
        if (c.item is None or c.item.id not in shown_or_changed) and not _held(c.fragment, request)
    ]
    now = _moment(request.now)
    if not about_someone and not relevant(cands, fused, floor.for_query(focused)):
        hits = [Hit(fused.scored(c.at), c.fragment, c.item, c.score) for c in cands[:TRACE_HITS]]
        shown = [*profile.cards, *_standing_beyond(item_scope, profile, [], cands, now, mem, counter)]
        return Recall(query, hits, shown, _block(shown), focused), read
    ranking = rank(cands, periods, SCAN_LIMIT, speaker)
    ranked: Sequence[Hit] = Hits(fused, ranking)  # a hit is built when packing or the trace reads it
    if reranker is not None:  # memory.rerank: a cross-encoder re-reads the best few
        ranked = await rerank(reranker, focused, ranked, mem.rerank_top_n)
    # The profile's guesses take only the room the hits leave (``memory_schema.is_guess``).
    room = mem.budget_tokens - profile.tokens + profile.guessed
    # A change said anywhere later marks a candidate turn, not only a change among the candidates.
    changed = turns_changed_later(
        [*(c.fragment for c, _, _ in ranking if c.fragment is not None), *(t for _, t in said)],
        scope.turn_of, scope.df.__getitem__, replaced=item_scope.replaced_turns if item_scope else frozenset())
    cards = select(ranked, counter, mem.top_k, room, scope.is_common, scope.turn_of, changed)
    if profile.guessed:  # ``select`` fitted the hits' block, its markers and preamble too, in ``room``
        profile = profile.beside(counter.text(render_block([])) + sum(card_cost(c, counter) for c in cards), room)
    # A retrieval is an access (staleness reads it); the profile's standing facts are not retrieved.
    touched = tuple(int(c.id[1:]) for c in cards if c.id.startswith("i"))
    shown = [*profile.cards, *_standing_beyond(item_scope, profile, cards, cands, now, mem, counter), *cards]
    return Recall(query, list(ranked[:TRACE_HITS]), shown, _block(shown), focused, touched), read


def _standing_beyond(
    scope: ItemScope | None, profile: Profile, cards: Sequence[Card], cands: Sequence[Candidate], now: dt.datetime,
    mem: Memory, counter: TokenCounter,
) -> list[Card]:
    """The standing facts past the profile's budget that fit what the block has left (``profile.beyond``):
    shown after the profile's, before the hits."""
    rest = scope.profile.left_out(scope.rows, now) if scope is not None and mem.profile else []
    if not rest or len(cards) >= mem.top_k:
        return []
    used = counter.text(render_block([*profile.cards, *cards]))

    def fits(card: Card) -> bool:
        nonlocal used
        cost = card_cost(card, counter)
        if used + cost > mem.budget_tokens:
            return False
        used += cost
        return True

    asked = [c.item.id for c in cands if c.item is not None]
    return beyond(rest, profile, cards, asked, fits, mem.top_k - len(cards))


def _terms(focused: str, query: str) -> tuple[list[str], list[Period]]:
    """BM25's terms of the focused query (each word asked counts more than its other forms), and
    the periods the query names."""
    asked = tokenize(focused)
    return [*asked * (ASKED_TERM_WEIGHT - 1), *inflected(asked)], periods_in(query)


def _who(query: str, scope: ScopeIndex) -> tuple[Role | None, bool]:
    """Which side of the conversation the query's names point to, and whether it names a participant."""
    speaker = speaker_named(scope.mentions.of(t) for t in names_in(query, scope.is_common))
    return speaker, names_someone(query, scope.is_common)


def _profile(
    scope: ItemScope | None, turns: ScopeIndex, said: Sequence[tuple[str, Fragment]], mem: Memory,
    counter: TokenCounter, now: dt.datetime,
) -> Profile:
    """The user's profile: facts a later one may have changed marked, and those a later turn may have."""
    if scope is None:
        return profile_of((), mem, counter, now)
    changed = scope.changed | changed_by_turns(turns, said, scope.rows)
    return scope.profile.of(scope.version, scope.rows, mem, counter, now, changed)


def changed_by_turns(scope: ScopeIndex, said: Sequence[tuple[str, Fragment]], facts: Sequence[ItemRow]) -> frozenset[int]:
    """The ids of ``facts`` a later turn of the user's (of ``said``) may have changed (``facts_changed_by_turns``)."""
    if not said:
        return frozenset()
    return facts_changed_by_turns(facts, scope.turn, said, scope.turn_of, scope.df.__getitem__)


# (tenant, user, the user's facts) → the ids of those a later turn of hers may have changed.
TurnMarks = Callable[[str, str, Sequence[ItemRow]], Coroutine[Any, Any, frozenset[int]]]


def turn_marks(index: FragmentIndex) -> TurnMarks:
    """A ``TurnMarks`` over ``index`` (what the profile endpoint and the inspector mark as recall does); call it
    where ``index`` is searched (its loop)."""

    async def marks(tenant: str, user: str, facts: Sequence[ItemRow]) -> frozenset[int]:
        scope = await index.scope(tenant, user)
        return changed_by_turns(scope, await scope.said_changes(), facts)

    return marks


def _held(fragment: Fragment | None, request: RecallRequest) -> bool:
    return fragment is not None and fragment.session == request.session and fragment.position < request.held


def _block(cards: Sequence[Card]) -> str | None:
    return render_block(cards) if cards else None


def _moment(epoch: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(epoch, dt.UTC)


NO_ITEMS = ItemCandidates({}, {}, {})


async def _no_items() -> None:
    return None


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
        "boost": s.boost,
        "fused": s.score,
        "dated": hit.dated,
        "score": hit.score,
    }
