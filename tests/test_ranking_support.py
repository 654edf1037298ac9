"""Ranking's support: a turn inherits part of a turn one or two apart, and of the best other turn near it in its session."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.memory.recall.ranking import (
    NEARBY_TURNS,
    NEARBY_WEIGHT,
    NEIGHBOUR_WEIGHT,
    SECOND_NEIGHBOUR_WEIGHT,
    Candidate,
    nearby_support,
    neighbour_support,
    rank,
)
from proxy.store.records import Fragment, ItemRow

MAY_8 = dt.datetime(2023, 5, 8, 13, 56, tzinfo=dt.UTC).timestamp()


def frag(fid: int, position: int, *, session: str = "s1", day: int = 0) -> Fragment:
    return Fragment(id=fid, session=session, hash=f"h{fid}", role="user", text="words", position=position,
                    tokens=1, created=MAY_8 + day * 86_400 + position)


def supported_nearby(cands: list[Candidate], base: list[float]) -> list[float]:
    """Each base score as ``rank`` adds the support of the turns near it to it."""
    return [b + s for b, s in zip(base, nearby_support(cands, base), strict=True)]


def supported_by_neighbours(cands: list[Candidate], base: list[float]) -> list[float]:
    """Each base score as ``rank`` adds the neighbours' support to it."""
    return [b + s for b, s in zip(base, neighbour_support(cands, base), strict=True)]


def cand(f: Fragment, score: float, at: int = 0) -> Candidate:
    return Candidate(at, score, f, None)


def item_cand(score: float) -> Candidate:
    row = ItemRow(id=1, session=None, type="preference", key="user.preference.tea", content="Prefers tea",
                  importance=0.5, confidence=1.0, source="user-stated", expires_at=None, status="active",
                  superseded_by=None, turns=[], fragment_hashes=[], seen_count=1, access_count=0, last_access=None,
                  created=MAY_8, updated=MAY_8)
    return Candidate(0, score, None, row)


def test_a_turn_gets_a_share_of_the_best_other_turn_near_it_in_its_session() -> None:
    hit, near, alone = frag(1, 2), frag(2, 9), frag(3, 4, session="s2")
    far = frag(4, 2 + NEARBY_TURNS + 1)  # same session, beyond reach
    cands = [cand(hit, 0.8), cand(near, 0.3), cand(alone, 0.35), cand(far, 0.3), item_cand(0.5)]
    out = supported_nearby(cands, [0.8, 0.3, 0.35, 0.3, 0.5])
    # near (seven turns from the hit) inherits from it; the hit from near, its best other turn in
    # reach; far inherits from near (within reach of it); another session's turn and the item keep their own.
    assert out == pytest.approx([0.8 + NEARBY_WEIGHT * 0.3, 0.3 + NEARBY_WEIGHT * 0.8, 0.35,
                                 0.3 + NEARBY_WEIGHT * 0.3, 0.5])


def test_nearby_is_counted_in_turns_of_a_session_never_in_time() -> None:
    # Ten chats of one morning: the same second, ten sessions, no support between them.
    burst = [cand(frag(i, 3, session=f"chat{i}"), 0.5 + i / 100) for i in range(10)]
    assert nearby_support(burst, [c.score for c in burst]) == [0.0] * 10
    # One chat over months: turns said weeks apart but five turns apart support each other.
    months = [cand(frag(1, 4), 0.8), cand(frag(2, 9, day=40), 0.3)]
    assert nearby_support(months, [0.8, 0.3]) == pytest.approx([NEARBY_WEIGHT * 0.3, NEARBY_WEIGHT * 0.8])


def test_rank_brings_a_relevant_turn_near_a_strong_hit_before_an_equal_one_elsewhere() -> None:
    hit, same_chat, other_chat = frag(1, 2), frag(2, 9), frag(3, 9, session="s2")
    ranked = rank([cand(hit, 0.9, 0), cand(other_chat, 0.3, 1), cand(same_chat, 0.3, 2)], [])
    assert [c.fragment.id for c, _, _ in ranked if c.fragment] == [1, 2, 3]
    # Support from the turns nearby adds to support from an adjacent turn.
    next_to = frag(4, 3)
    ranked = rank([cand(hit, 0.9), cand(next_to, 0.1)], [])
    assert ranked[1][1] == pytest.approx(0.1 + NEIGHBOUR_WEIGHT * 0.9 + NEARBY_WEIGHT * 0.9)


def test_a_turn_two_apart_inherits_less_than_an_adjacent_one() -> None:
    hit, reply, goes_on, three_off = frag(1, 4), frag(2, 5), frag(3, 6), frag(4, 7)
    out = supported_by_neighbours([cand(hit, 0.8), cand(goes_on, 0.2), cand(three_off, 0.1)], [0.8, 0.2, 0.1])
    # goes_on is the hit's speaker after a reply that is no candidate; three_off is adjacent to goes_on only.
    assert out == pytest.approx([0.8 + SECOND_NEIGHBOUR_WEIGHT * 0.2, 0.2 + max(
        SECOND_NEIGHBOUR_WEIGHT * 0.8, NEIGHBOUR_WEIGHT * 0.1), 0.1 + NEIGHBOUR_WEIGHT * 0.2])
    # With the reply a candidate too, the adjacent share wins when it is larger.
    out = supported_by_neighbours([cand(hit, 0.8), cand(reply, 0.5), cand(goes_on, 0.2)], [0.8, 0.5, 0.2])
    assert out[2] == pytest.approx(0.2 + NEIGHBOUR_WEIGHT * 0.5)


turns = st.lists(
    st.tuples(st.sampled_from(["s1", "s2"]), st.integers(0, 2), st.integers(0, 60),
              st.floats(0.0, 2.0, allow_nan=False)),
    min_size=1, max_size=25, unique_by=lambda t: (t[0], t[1], t[2]),
)


@given(turns)
def test_nearby_support_is_the_best_other_turn_within_reach(rows: list) -> None:
    cands = [cand(frag(i, pos, session=s, day=d), score, i) for i, (s, d, pos, score) in enumerate(rows)]
    base = [score for *_, score in rows]
    out = supported_nearby(cands, base)
    for j, (c, b, o) in enumerate(zip(cands, base, out, strict=True)):
        assert c.fragment is not None
        reach = [base[k] for k, other in enumerate(cands) if k != j and other.fragment
                 and other.fragment.session == c.fragment.session
                 and abs(other.fragment.position - c.fragment.position) <= NEARBY_TURNS]
        assert o == pytest.approx(b + NEARBY_WEIGHT * max(reach, default=0.0))
        if not reach:
            assert o == b  # alone in its stretch: nothing to inherit


@given(turns)
def test_neighbour_support_is_bounded_by_the_best_turn_within_two(rows: list) -> None:
    cands = [cand(frag(i, pos, session=s, day=d), score, i) for i, (s, d, pos, score) in enumerate(rows)]
    base = [score for *_, score in rows]
    out = supported_by_neighbours(cands, base)
    for c, b, o in zip(cands, base, out, strict=True):
        assert c.fragment is not None
        near = [base[k] for k, other in enumerate(cands) if other.fragment and other.fragment.session
                == c.fragment.session and 0 < abs(other.fragment.position - c.fragment.position) <= 2]
        assert b <= o <= b + NEIGHBOUR_WEIGHT * max(near, default=0.0) + 1e-12
        if not near:
            assert o == b
