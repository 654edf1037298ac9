"""The pure parts of retrieval: query focus, named periods, neighbour support, packing into cards."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.memory.recall.cards import pack, render_block
from proxy.memory.recall.packing import CARD_TURNS, Tally, select, stretch_card, stretches
from proxy.memory.recall.query import focus, names_someone, periods_in
from proxy.memory.recall.ranking import Candidate, Hit, Key, boosts, neighbour_support, rank
from proxy.memory.search import fragment_index as fragment_search
from proxy.memory.search.embedder import HashEmbedder
from proxy.memory.search.embedder.caching import CachingEmbedder
from proxy.memory.search.fragment_index import FragmentIndex
from proxy.memory.search.fusion import Part, Scored
from proxy.memory.search.scope_index import ScopeIndex, top_of
from proxy.store import open_store
from proxy.store.records import Fragment, ItemRow, ItemWrite, NewFragment, NewItem
from proxy.tokens import TokenCounter

NAMES = {"caroline", "melanie"}
MAY_8 = dt.datetime(2023, 5, 8, 13, 56, tzinfo=dt.UTC).timestamp()


def common(term: str) -> bool:
    return term in NAMES


def test_focus_drops_names_that_are_everywhere_but_keeps_the_rest() -> None:
    assert focus("When did Caroline go to the support group?", common) == "When did go to the support group?"
    assert focus("What is Caroline's book, (Melanie)?", common) == "What is book,"
    # The first word may be any capitalised word; rare names are what the query is about.
    assert focus("Caroline said what?", common) == "Caroline said what?"
    assert focus("Where is Biscuit now?", common) == "Where is Biscuit now?"
    assert focus("我的猫对什么过敏？", common) == "我的猫对什么过敏？"


def test_a_word_is_a_common_name_by_the_history_it_is_asked_of() -> None:
    # The same question of a user whose history is full of "Caroline", then of one whose is not.
    assert focus("When did Caroline go?", common) == "When did go?"
    assert focus("When did Caroline go?", lambda t: False) == "When did Caroline go?"
    assert names_someone("So Caroline went?", common) and not names_someone("So Caroline went?", lambda t: False)


def test_focus_never_empties_the_query() -> None:
    assert focus("Hi Caroline", lambda t: True) == "Hi"
    assert focus("Caroline", common) == "Caroline"


def test_periods_named_with_a_year() -> None:
    day = dt.date(2023, 2, 1)
    for text in ("on 1 February, 2023", "on February 1st, 2023", "2023-02-01", "2023年2月1日"):
        assert periods_in(f"What did I say {text}?") == [(day, day)], text
    october = (dt.date(2023, 10, 1), dt.date(2023, 10, 31))
    assert periods_in("What happened in October 2023?") == [october]
    assert periods_in("2023年10月的会议") == [october]


def test_periods_without_a_year_or_impossible_are_ignored() -> None:
    assert periods_in("What did I do on 3 May?") == []
    assert periods_in("Meet me at 10:30 tomorrow") == []
    # "31 February" is no day; the month it names still is a period.
    assert periods_in("on 31 February, 2023") == [(dt.date(2023, 2, 1), dt.date(2023, 2, 28))]


def frag(fid: int, position: int, text: str = "words", *, session: str = "s1", role: str = "user",
         created: float = MAY_8) -> Fragment:
    return Fragment(id=fid, session=session, hash=f"h{fid}", role=role, text=text, position=position, tokens=1,
                    created=created)


def hit(f: Fragment, score: float) -> Hit:
    key: Key = ("f", f.id)
    return Hit(Scored(key, Part(0.5, score), Part(None, 0.0), score), fragment=f, score=score)


def cand(f: Fragment, score: float, at: int = 0) -> Candidate:
    return Candidate(at, score, f, None)


def test_rank_lifts_a_turn_next_to_a_strong_hit_and_a_named_day() -> None:
    a, b, c = frag(1, 0), frag(2, 1), frag(3, 7)
    d = frag(4, 3, session="s2", created=MAY_8 + 40 * 86400)
    cands = [cand(a, 0.9), cand(c, 0.3), cand(b, 0.25), cand(d, 0.2)]
    ranked = rank(cands, [(dt.date(2023, 6, 17), dt.date(2023, 6, 17))])
    # f2 inherits from f1 next to it; f4 was said on the day the query names; f1, f2 and f3
    # share a day (f1 inherits from f3, its day's second best; the others from f1).
    assert [c.fragment.id for c, _, _ in ranked if c.fragment] == [1, 2, 4, 3]
    assert [score for _, score, _ in ranked] == pytest.approx(
        [0.9 + 0.3 * 0.25 + 0.2 * 0.3, 0.25 + 0.3 * 0.9 + 0.2 * 0.9, 0.5, 0.3 + 0.2 * 0.9])
    assert ranked[2][2] and not ranked[0][2]


def test_rank_keeps_the_fused_order_on_ties_and_stops_at_the_limit() -> None:
    cands = [cand(frag(i, 10 * i), 0.5, at=i) for i in range(1, 6)]
    assert [c.at for c, _, _ in rank(cands, [], limit=3)] == [1, 2, 3]


def test_a_turn_gets_a_share_of_its_best_adjacent_turn() -> None:
    a, b, c = frag(1, 4), frag(2, 5), frag(3, 6)
    far, other = frag(4, 9), frag(5, 5, session="s2")
    cands = [cand(a, 0.5), cand(b, 0.2), cand(c, 0.1), cand(far, 0.4), cand(other, 0.3)]
    base = [0.5, 0.2, 0.1, 0.4, 0.3]
    out = [b + s for b, s in zip(base, neighbour_support(cands, base), strict=True)]
    # b is next to a and c (takes the better, a); c takes half a's share from two apart, more
    # than b's; far (three from c) and other touch nothing.
    assert out == pytest.approx([0.5 + 0.3 * 0.2, 0.2 + 0.3 * 0.5, 0.1 + 0.15 * 0.5, 0.4, 0.3])


def test_rank_drops_candidates_without_score() -> None:
    assert rank([cand(frag(1, 0), 0.0)], []) == []


def ids(cards: list) -> list[list[list[str]]]:
    return [[[h.id for h in excerpt] for excerpt in card] for card in cards]


def test_consecutive_turns_are_one_excerpt_and_turns_close_by_one_card() -> None:
    # A fragment's id stands for its place in the user's history (``packing.by_id``): one user's turns.
    a, c, b = hit(frag(4, 4), 0.9), hit(frag(5, 5), 0.7), hit(frag(6, 6), 0.8)
    assert ids(stretches([a, b])) == [[["f4"], ["f6"]]]  # two apart: one card, a gap between
    assert ids(stretches([a, c, b])) == [[["f4", "f5", "f6"]]]  # the turn between bridges them
    far = hit(frag(7 + CARD_TURNS, 7 + CARD_TURNS), 0.6)
    assert ids(stretches([a, c, b, far])) == [[["f4", "f5", "f6"]], [[f"f{7 + CARD_TURNS}"]]]
    # The next chat's first turn follows the last of this one in the history, but is not its next turn.
    next_chat = hit(frag(7, 0, session="s2"), 0.5)
    assert ids(stretches([a, c, b, next_chat])) == [[["f4", "f5", "f6"], ["f7"]]]


def test_a_card_never_spans_two_dates_its_header_shows_one() -> None:
    a = hit(frag(1, 4), 0.9)
    next_day = hit(frag(2, 5, created=MAY_8 + 86400), 0.7)
    assert ids(stretches([a, next_day])) == [[["f1"]], [["f2"]]]


def test_a_card_is_one_line_per_turn_under_its_date() -> None:
    a = hit(frag(1, 4, "I adopted a cat", role="user"), 0.9)
    b = hit(frag(2, 5, "What is its name?", role="assistant"), 0.5)
    c = hit(frag(3, 8, "Miso", role="user"), 0.4)
    ((excerpt, later),) = stretches([a, b, c])
    card = stretch_card([excerpt, later], a)
    assert card.text == "User: I adopted a cat\nAssistant: What is its name?\n…\nUser: Miso"
    assert (card.source, card.date, card.id) == ("user said", "2023-05-08", "f1,f2,f3")


def test_a_turn_a_later_one_may_have_changed_stands_on_a_marked_card_of_its_own() -> None:
    window = hit(frag(1, 0, "I always book a window seat."), 0.5)
    reply = hit(frag(2, 1, "Noted, a window seat it is.", role="assistant"), 0.4)
    aisle = hit(frag(3, 2, "These days I take the aisle seat."), 0.9)
    counter = TokenCounter(None)
    changed = frozenset({1, 2})
    assert ids(stretches([window, reply, aisle], changed=changed)) == [[["f1", "f2"]], [["f3"]]]
    cards = select([aisle, window, reply], counter, top_k=4, budget=200, changed=changed)
    block = render_block(cards)
    assert block.index("[2023-05-08]\nUser: These days") < block.index(
        "[2023-05-08 · may have changed since]\nUser: I always book a window seat.\nAssistant: Noted")
    assert counter.text(block) <= 200
    assert [c.changed for c in cards] == [False, True]
    # Unmarked, the three are one card.
    assert [c.id for c in select([aisle, window, reply], counter, top_k=4, budget=200)] == ["f1,f2,f3"]


def test_select_respects_budget_and_top_k_and_skips_what_does_not_fit() -> None:
    counter = TokenCounter(None)
    day = [MAY_8 + i * 86400 for i in range(9)]  # a day each: a card each
    medium = [hit(frag(i, 10 * i, "word " * 80, created=day[i]), 0.9 - i / 100) for i in (1, 2)]
    shorts = [hit(frag(i, 10 * i, f"short fact number {i}", created=day[i]), 0.8 - i / 100) for i in range(3, 9)]
    cards = select([*medium, *shorts], counter, top_k=4, budget=210)
    # The second medium turn does not fit after the first: shorter ones take its place, whole.
    assert [c.id for c in cards] == ["f1", "f3", "f4", "f5"]
    assert counter.text(render_block(cards)) <= 210
    assert all("…" not in c.text for c in cards)


def test_what_was_said_close_together_in_a_session_is_one_card_its_excerpts_apart() -> None:
    counter = TokenCounter(None)
    a, b = hit(frag(2, 2, "I adopted a cat"), 0.9), hit(frag(9, 9, "She is called Miso"), 0.8)
    c = hit(frag(3, 3, "Congrats!", role="assistant"), 0.7)
    later = hit(frag(200, 1, "The vet says she is fine", session="s2"), 0.6)  # far on in the history
    (card,) = select([a, b, later, c], counter, top_k=1, budget=800)
    assert card.text == "User: I adopted a cat\nAssistant: Congrats!\n…\nUser: She is called Miso"
    assert (card.id, card.date) == ("f2,f3,f9", "2023-05-08")
    assert [x.id for x in select([a, b, later, c], counter, top_k=2, budget=800)] == ["f2,f3,f9", "f200"]


def test_chats_of_one_day_are_shown_as_chats_days_apart_are() -> None:
    """Five chats in one minute show the turns that five chats ten days apart show: what groups
    them is their place in the history; the date only splits a card, since its header shows one."""
    counter = TokenCounter(None)
    def chats(step: float) -> list[Hit]:
        return [hit(frag(10 * i, 3, f"fact number {i}", session=f"chat{i}", created=MAY_8 + i * step), 1 - i / 10)
                for i in range(1, 6)]
    burst, dated = select(chats(1.0), counter, 8, 800), select(chats(10 * 86400.0), counter, 8, 800)
    assert [c.id for c in dated] == ["f10", "f20", "f30", "f40", "f50"]  # a date each: the best match first
    assert [c.id for c in burst] == ["f10,f20,f30,f40,f50"]  # one stretch of the history, a gap between chats
    lines = [ln for c in burst for ln in c.text.split("\n") if ln != "…"]
    assert lines == [c.text for c in dated]
    # A long chat on one date: its far stretches are cards of their own, the best match's first.
    far = [hit(frag(i * CARD_TURNS * 2, i * CARD_TURNS * 2, f"fact number {i}"), i / 10) for i in (3, 1, 2)]
    assert [c.id for c in select(far, counter, 8, 800)] == [f"f{i * CARD_TURNS * 2}" for i in (3, 1, 2)]


LINES = ["我的猫对花生过敏。", "url http://x.y/z?a=1.", "emoji 😀!", "[bracket] and \"quotes\".", "ends …",
         "Wow!!!", "3.5 km, then 12:30", "tabs\tand  spaces", "Café déjà vu?"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 30), st.sampled_from(LINES), st.booleans()),
                min_size=1, max_size=12, unique_by=lambda t: (t[0], t[1])))
def test_the_tally_counts_the_block_as_the_tokenizer_does(turns: list[tuple[int, int, str, bool]]) -> None:
    """What ``select`` relies on: a block counts as its headers, lines and gaps, each counted once."""
    counter = TokenCounter("gpt-4o-mini")
    tally = Tally(counter, 10_000, 100)
    for i, (d, pos, text, user) in enumerate(turns):
        h = hit(frag(i + 1, pos, text, role="user" if user else "assistant", created=MAY_8 + d * 86400), 0.5)
        assert tally.add(h)
        assert tally.used == counter.text(render_block(tally.cards()))
    assert tally.cards_count == len(tally.cards())


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 90), st.sampled_from(LINES), st.integers(1, 12)), min_size=1, max_size=30,
                unique_by=lambda t: t[0]),
       st.integers(60, 600), st.frozensets(st.integers(1, 91)))
def test_the_tally_counts_turns_taken_in_any_order_as_the_tokenizer_does(
    turns: list[tuple[int, str, int]], cap_budget: int, changed: frozenset[int]
) -> None:
    """Hits come best first, so a turn lands anywhere among those taken: before, after or between
    them, joining a card, bridging two or standing alone. Turns are dated as they were stored (a day
    every 30), and some a later turn may have changed (``changed``: a card of their own, marked). Whatever
    the tally takes, it counts as the rendered block; what it refuses would not fit (a card of several turns
    past half the budget, or the block past it)."""
    counter = TokenCounter("gpt-4o-mini")
    tally = Tally(counter, cap_budget, 100, changed=changed)
    for place, text, times in turns:
        h = hit(frag(place + 1, place, f"{text} " * times, session=f"s{place // 7}",
                     created=MAY_8 + (place // 30) * 86400), 0.5)
        before = (tally.used, tally.cards_count, len(tally.turns))
        if tally.add(h):
            assert tally.used <= cap_budget
            if not tally.capped:  # else one turn counts as half the budget, and ``pack`` cuts it to that
                assert tally.used == counter.text(render_block(tally.cards()))
        else:
            assert (tally.used, tally.cards_count, len(tally.turns)) == before
    assert tally.cards_count == len(tally.cards())


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 20), st.sampled_from(LINES), st.integers(1, 60)),
                min_size=1, max_size=30),
       st.integers(40, 400), st.integers(1, 8), st.frozensets(st.integers(1, 31)))
def test_select_keeps_budget_and_top_k_and_what_pack_makes_of_its_cards(
    turns: list[tuple[int, int, str, int]], budget: int, top_k: int, changed: frozenset[int]
) -> None:
    """The block is counted once, not re-packed card by card: the result must be what ``pack`` would keep."""
    counter = TokenCounter("gpt-4o-mini")
    ranked = [hit(frag(i + 1, pos, f"{text} " * times, created=MAY_8 + d * 86400), 1 - i / 100)
              for i, (d, pos, text, times) in enumerate(turns)]
    cards = select(ranked, counter, top_k=top_k, budget=budget, changed=changed)
    assert counter.text(render_block(cards)) <= budget and len(cards) <= top_k
    assert pack(cards, counter, top_k, budget) == cards
    for card in cards:  # a card's turns are all marked or none, and its header says which
        marked = {int(i[1:]) in changed for i in card.hit_ids}
        assert marked == {card.changed}


def test_select_truncates_a_single_huge_turn_rather_than_losing_it() -> None:
    counter = TokenCounter(None)
    cards = select([hit(frag(1, 0, "word " * 2000), 0.9)], counter, top_k=5, budget=300)
    assert len(cards) == 1 and cards[0].text.endswith("…")
    assert counter.text(render_block(cards)) <= 300


def test_top_of_is_exact_top_k_by_cosine() -> None:
    rng = np.random.default_rng(3)
    matrix = rng.normal(size=(500, 16)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    ids = np.arange(1000, 1500, dtype=np.int64)
    query = matrix[42]
    found = top_of(matrix @ query, ids, 5)
    expected = sorted(range(500), key=lambda i: -float(matrix[i] @ query))[:5]
    assert set(found) == {1000 + i for i in expected}
    assert found[1042] == pytest.approx(1.0)
    assert top_of(matrix[:3] @ query, ids[:3], 10).keys() == {1000, 1001, 1002}


def test_scope_index_grows_and_scores_known_rows() -> None:
    scope = ScopeIndex(4)
    for i in range(1500):  # past the first capacity
        scope.add(frag(i + 1, i, created=MAY_8 + 3600 * i), [f"t{i % 7}"], np.eye(4, dtype=np.float32)[i % 4])
    matrix, ids = scope.snapshot()
    assert matrix.shape == (1500, 4) and ids[-1] == 1500
    assert scope.cosines([1, 2, 99_999], np.eye(4, dtype=np.float32)[0]) == {1: 1.0, 2: 0.0}
    assert scope.df["t0"] == 215
    assert scope.fragments[1500].position == 1499


def test_cosines_are_read_from_the_product_of_every_row_and_computed_past_it() -> None:
    scope = ScopeIndex(4)
    for i in range(6):
        scope.add(frag(i + 1, i), ["t"], np.eye(4, dtype=np.float32)[i % 4])
    query = np.array([0.5, 0.5, 0.5, 0.5], dtype=np.float32)
    matrix, _ = scope.snapshot()
    sims = matrix[:4] @ query  # taken before rows 5 and 6 were there
    sims[0] = 7.0  # so that a value read from it is told from one computed
    assert scope.cosines([1, 2, 6, 99_999], query, sims) == {1: 7.0, 2: 0.5, 6: 0.5}
    assert scope.cosines([1], query) == {1: 0.5}


class HashedEncoder:
    dim = 16

    def encode(self, texts: list[str]) -> np.ndarray:
        return HashEmbedder(16).embed(texts)


async def test_a_query_vector_the_embedder_holds_needs_no_thread(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "q.db"), 16)
    try:
        index = FragmentIndex(store.fragments, CachingEmbedder("hashed", HashedEncoder()), TokenCounter(None))
        fresh = index.query_vector("a new question")
        assert not fresh.done()  # computed on the query's thread
        np.testing.assert_array_equal(await fresh, HashEmbedder(16).embed(["a new question"])[0])
        held = index.query_vector("a new question")
        assert held.done()  # answered at once
        np.testing.assert_array_equal(await held, await fresh)
    finally:
        store.close()


class GatedEncoder(HashedEncoder):
    """Holds the query's thread inside the model until ``release`` is set."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def encode(self, texts: list[str]) -> np.ndarray:
        assert self.release.wait(10)
        return super().encode(texts)


async def test_a_query_waits_for_its_thread_to_begin_only_when_the_thread_is_free(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fragment_search, "QUERY_START_WAIT_S", 30.0)  # a wait that never ends early would show
    store = open_store(str(tmp_path / "w.db"), 16)
    encoder = GatedEncoder()
    try:
        index = FragmentIndex(store.fragments, CachingEmbedder("gated", encoder), TokenCounter(None))
        started = time.perf_counter()
        first = index.query_vector("first question")  # the thread is free: returns once it has begun
        second = index.query_vector("second question")  # the thread is busy with the first: no wait
        assert time.perf_counter() - started < 5.0
        assert not first.done() and not second.done()
        encoder.release.set()
        np.testing.assert_array_equal(await first, HashEmbedder(16).embed(["first question"])[0])
        np.testing.assert_array_equal(await second, HashEmbedder(16).embed(["second question"])[0])
        await asyncio.sleep(0)  # the futures' done callbacks
        assert index._queries == 0  # so the next query waits for the thread again
    finally:
        encoder.release.set()
        store.close()


def test_scope_index_finds_what_was_said_in_a_period_oldest_first() -> None:
    scope = ScopeIndex(4)
    for i in range(1, 2001):  # one fragment an hour, for ~83 days
        scope.add(frag(i, i, created=MAY_8 + 3600 * i), ["t"], np.eye(4, dtype=np.float32)[0])
    day = MAY_8 + 3600 * 1000
    assert scope.created_between(day, day + 3600 * 5, 100) == [1000, 1001, 1002, 1003, 1004, 1005]
    assert scope.created_between(day, day + 3600 * 500, 3) == [1000, 1001, 1002]
    assert scope.created_between(MAY_8 - 10, MAY_8, 10) == []


async def test_in_memory_knn_agrees_with_sqlite_vec_and_stays_in_its_user(tmp_path: Path) -> None:
    """The vectors live in sqlite-vec; searches read a copy in memory. Both must rank alike."""
    store = open_store(str(tmp_path / "m.db"), 16)
    try:
        index = FragmentIndex(store.fragments, HashEmbedder(16), TokenCounter(None))
        rng = np.random.default_rng(5)
        for user in ("ana", "bob"):
            vectors = rng.normal(size=(300, 16)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            news = [NewFragment(f"{user}{i}", "user", f"t{i}", f"t{i}", i, 1) for i in range(300)]
            await store.fragments.add("t", user, "s", news, vectors)
        scope = await index.scope("t", "ana")
        assert scope.size == 300 and {m.session for m in scope.fragments.values()} == {"s"}
        query = rng.normal(size=16).astype(np.float32)
        query /= np.linalg.norm(query)
        matrix, ids = scope.snapshot()
        mine = top_of(matrix @ query, ids, 10)
        theirs = dict(await store.fragments.knn("t", "ana", query, 10))
        assert mine.keys() == theirs.keys()
        assert all(mine[i] == pytest.approx(theirs[i], abs=1e-5) for i in mine)
        assert all(scope.fragments[i].hash.startswith("ana") for i in mine)
    finally:
        store.close()


async def test_a_hidden_or_forgotten_fragment_leaves_the_index_in_memory(tmp_path: Path) -> None:
    """Another process suppresses or forgets: the next search rebuilds from what is active."""
    store = open_store(str(tmp_path / "g.db"), 16)
    try:
        index = FragmentIndex(store.fragments, HashEmbedder(16), TokenCounter(None))
        news = [NewFragment(f"h{i}", "user", f"fact {i}", f"fact {i}", i, 2) for i in range(5)]
        await store.fragments.add("t", "ana", "s", news, np.eye(16, dtype=np.float32)[:5])
        before = await index.scope("t", "ana")
        assert sorted(f.text for f in before.fragments.values()) == [f"fact {i}" for i in range(5)]
        # A fact said in turn h1 is superseded: the turn is suppressed with it, in the same write.
        said = NewItem("preference", "k", "fact 1", "fact", 0.5, 1.0, "user-stated", None, None, [1], ["h1"])
        _, old = await store.items.remember("t", "ana", "s", said, np.eye(16)[1], lambda _: ItemWrite())
        newer = dataclasses.replace(said, content="fact one", fragment_hashes=[])
        await store.items.remember("t", "ana", "s", newer, np.eye(16)[2], lambda _: ItemWrite(supersedes=(old,)))
        after = await index.scope("t", "ana")
        assert after is before  # one fragment hidden: dropped, not reloaded
        assert sorted(f.text for f in after.fragments.values()) == ["fact 0", "fact 2", "fact 3", "fact 4"]
        await store.users.forget("t", "ana")
        gone = await index.scope("t", "ana")
        assert gone is not before and not gone.fragments and gone.size == 0  # all gone: rebuilt
    finally:
        store.close()


async def test_recency_and_importance_settings_act_on_recall(tmp_path: Path) -> None:
    """``memory.recency_half_life_days`` and ``memory.importance_weight`` scale the fused scores of a request."""
    from proxy import config
    from proxy.memory.recall.recall import RecallRequest, recall_for
    from proxy.memory.search.fusion import Floor

    now = MAY_8 + 400 * 86_400
    store = open_store(str(tmp_path / "b.db"), 16)
    try:
        index = FragmentIndex(store.fragments, HashEmbedder(16), TokenCounter(None))
        await index.index("t", "ana", "old", [(0, "user", "My favourite tea is oolong tea.")], "keep", created=MAY_8)
        await index.index("t", "ana", "new", [(0, "user", "My favourite tea is jasmine tea.")], "keep", created=now)
        memory = config.from_dict({}, env={}).defaults.memory
        ask = RecallRequest("t", "ana", "q", [{"role": "user", "content": "Which tea is my favourite?"}], [], memory, now)

        async def boosts_by_session(settings: config.Memory) -> dict[str, float]:
            got = await recall_for(index, dataclasses.replace(ask, settings=settings), TokenCounter(None), Floor(0, 0))
            return {h.fragment.session: h.scored.boost for h in got.hits if h.fragment}

        assert await boosts_by_session(memory) == {"old": 1.0, "new": 1.0}  # off by default
        decayed = await boosts_by_session(memory.model_copy(update={"recency_half_life_days": 100.0}))
        assert decayed["new"] == 1.0 and decayed["old"] == pytest.approx(0.5 + 0.5 * 0.5**4)
        weighted = await boosts_by_session(memory.model_copy(update={"importance_weight": 0.4}))
        assert weighted == {"old": pytest.approx(0.8), "new": pytest.approx(0.8)}  # a fragment counts as 0.5
    finally:
        store.close()


def test_an_items_boost_reads_its_importance_and_when_it_was_last_stated() -> None:
    frag = Fragment(1, "s", "h", "user", "x", 0, 1, 0.0)
    row = ItemRow(2, "s", "entity", "k", "c", 1.0, 1.0, "user-stated", None, "active", None, [], [], 1, 0,
                  None, 0.0, 30 * 86_400.0)
    keys: list[Key] = [("f", 1), ("i", 2), ("f", 9)]
    assert boosts(keys, {1: frag}, {2: row}, 30 * 86_400.0, None, 0.0) is None
    out = boosts(keys, {1: frag}, {2: row}, 30 * 86_400.0, 30.0, 0.5)
    assert out == {("f", 1): pytest.approx(0.75 * 0.75), ("i", 2): pytest.approx(1.0)}


async def test_a_question_naming_someone_all_over_the_history_passes_the_gate(tmp_path: Path) -> None:
    """The gate (``ranking.relevant``) is for questions about nothing the user said; one that names a
    participant of their history (``query.names_someone``) is about it, however vague its other words.
    A sentence's first word is capitalised whatever it is: "Wow" all over a chatty history names nobody."""
    from proxy import config
    from proxy.memory.recall.recall import RecallRequest, recall_for
    from proxy.memory.search.fusion import Floor

    store = open_store(str(tmp_path / "n.db"), 64)
    try:
        index = FragmentIndex(store.fragments, HashEmbedder(64), TokenCounter(None))
        turns = [(i, "user", f"Wow, Biscuit chased toy number {i} around the garden.") for i in range(40)]
        await index.index("t", "ana", "s", turns, "keep", created=MAY_8)
        memory = config.from_dict({}, env={}).defaults.memory
        closed = Floor(min_cosine=2.0, keyword_min_cosine=2.0, min_bm25=1e9)  # nothing clears it

        async def cards(question: str) -> int:
            ask = RecallRequest("t", "ana", "q", [{"role": "user", "content": question}], [], memory, MAY_8)
            return len((await recall_for(index, ask, TokenCounter(None), closed)).cards)

        assert await cards("Would Biscuit enjoy a quieter flat?") >= 1
        assert await cards("Would Gandalf enjoy a quieter flat?") == 0  # a name the history does not hold
        assert await cards("would biscuit enjoy a quieter flat?") == 0  # not written as a name
        assert await cards("Wow, would a quieter flat be nicer?") == 0  # the first word
        assert await cards("Thanks. Wow, would a quieter flat be nicer?") == 0  # a sentence's first word
    finally:
        store.close()


def test_a_name_counts_where_no_sentence_begins() -> None:
    from proxy.memory.recall.query import names_someone

    common = {"caroline", "wow", "hey"}.__contains__
    assert names_someone("What did Caroline paint?", common)
    assert names_someone("Hey, what did Caroline's kids paint?", common)
    assert names_someone("Hey Caroline", common)
    assert not names_someone("Caroline said what?", common)  # a sentence's first word says nothing
    assert not names_someone("Hey, what is the capital of France?", common)
    assert not names_someone('I said "no." Wow, what now?', common)
    assert not names_someone("Fine! Hey there.", common)
    assert not names_someone("what did caroline paint?", common)
    assert not names_someone("卡罗琳画了什么？", common)


async def test_a_users_cards_are_the_same_when_other_users_talk_in_between(tmp_path: Path) -> None:
    """On a busy proxy the turns of many users are stored interleaved: between two of one user's
    turns come dozens of other users'. A card groups turns by their distance in that user's own
    history, so her block is what it would be were she the only user."""
    from proxy import config
    from proxy.memory.recall.recall import RecallRequest, recall_for
    from proxy.memory.search.fusion import Floor

    turns = [
        ("user", "My tomato seedlings in the garden are wilting."),
        ("assistant", "Tomato seedlings wilt when the garden soil dries out."),
        ("user", "I water the tomato bed every morning before work."),
        ("assistant", "Morning watering suits tomato plants well."),
        ("user", "The garden gets full sun after noon."),
    ]

    async def block(busy: bool) -> list[str]:
        store = open_store(str(tmp_path / f"busy-{busy}.db"), 64)
        try:
            index = FragmentIndex(store.fragments, HashEmbedder(64), TokenCounter(None))
            for position, (role, text) in enumerate(turns):
                await index.index("t", "ana", "s", [(position, role, text)], "keep", created=MAY_8)
                if busy:  # other users' turns, stored before her next one
                    for other in range(CARD_TURNS + 10):
                        await index.index("t", f"u{other}", "x", [(position, "user", f"Invoice {other} is due.")],
                                          "keep", created=MAY_8)
            memory = config.from_dict({}, env={}).defaults.memory
            ask = RecallRequest("t", "ana", "q", [{"role": "user", "content": "Why are my tomato seedlings wilting?"}],
                                [], memory, MAY_8)
            return [card.text for card in (await recall_for(index, ask, TokenCounter(None), Floor(0, 0))).cards]
        finally:
            store.close()

    alone = await block(busy=False)
    assert any(card.count("\n") >= 2 for card in alone)  # a card of several of her turns
    assert await block(busy=True) == alone


async def test_the_cached_fragment_count_is_what_the_cached_users_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index keeps a running count of the fragments its users' scopes hold (for the eviction
    bound): after searches, new turns, evictions and forgets it is the sum over the users cached."""
    import random

    monkeypatch.setattr(fragment_search, "CACHED_FRAGMENTS", 12)
    store = open_store(str(tmp_path / "c.db"), 16)
    try:
        index = FragmentIndex(store.fragments, HashEmbedder(16), TokenCounter(None))
        users = [f"u{n}" for n in range(6)]
        turns = dict.fromkeys(users, 0)
        rng = random.Random(7)
        for _ in range(80):
            user, step = rng.choice(users), rng.random()
            if step < 0.5:
                await index.index("t", user, "s", [(turns[user], "user", f"note {turns[user]} of {user}")], "keep")
                turns[user] += 1
            elif step < 0.9:
                await index.scope("t", user)
            else:
                index.forget_scope("t", user)
            held = [index.cached("t", u) for u in users]
            assert index.cached_fragments == sum(s.size for s in held if s is not None)
            assert index.cached_fragments <= 12 or sum(s is not None for s in held) == 1
    finally:
        store.close()
