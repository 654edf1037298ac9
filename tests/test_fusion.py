"""Score fusion: normalisation, ranking, the relevance floor and the boosts (one implementation)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.memory.search.fusion import (
    Floor,
    Fused,
    Normalisation,
    Part,
    Scored,
    boost_of,
    fuse,
    importance_factor,
    recency_factor,
)

Key = tuple[str, int]


def ranked(fused: Fused[str]) -> list[Scored[str]]:
    return [fused.scored(i) for i in range(len(fused))]


def norms(scores: dict[str, float], method: Normalisation) -> dict[str, float]:
    return {s.id: s.vector.norm for s in ranked(fuse(scores, {}, 1.0, 0.0, vector_norm=method))}


def test_minmax_maps_onto_zero_one() -> None:
    assert norms({"a": 2.0, "b": 4.0, "c": 3.0}, "minmax") == {"a": 0.0, "b": 1.0, "c": 0.5}


def test_max_anchors_the_low_end_at_zero() -> None:
    assert norms({"a": 2.0, "b": 4.0}, "max") == {"a": 0.5, "b": 1.0}
    # A negative low end is kept: the anchor is min(0, min).
    assert norms({"a": -1.0, "b": 3.0}, "max") == {"a": 0.0, "b": 1.0}


@pytest.mark.parametrize("method", ["minmax", "max"])
def test_equal_scores_are_all_best_and_empty_is_empty(method: Normalisation) -> None:
    assert norms({"a": 0.3, "b": 0.3}, method) == {"a": 1.0, "b": 1.0}
    assert len(fuse({}, {}, 0.6, 0.4)) == 0


def test_fuse_weights_normalised_parts_and_keeps_raw() -> None:
    out = ranked(fuse({"a": 0.8, "b": 0.4}, {"b": 6.0, "c": 2.0}, 0.6, 0.4))
    by_id = {s.id: s for s in out}
    assert by_id["a"].vector == Part(0.8, 1.0)
    assert by_id["a"].bm25 == Part(None, 0.0)
    assert by_id["b"].score == pytest.approx(0.6 * 0.0 + 0.4 * 1.0)
    assert by_id["c"].vector == Part(None, 0.0)
    assert by_id["c"].bm25.norm == pytest.approx(2.0 / 6.0)
    assert [s.id for s in out] == ["a", "b", "c"]


def test_ties_are_broken_deterministically() -> None:
    vector = {"b": 0.5, "a": 0.5, "c": 0.5}
    assert fuse(vector, {}, 1.0, 0.0).keys == fuse(dict(reversed(vector.items())), {}, 1.0, 0.0).keys == ["a", "b", "c"]


def test_the_floor_reads_raw_scores() -> None:
    floor = Floor()
    assert not floor.passes(0.12, None)  # min-max alone would crown it with 1.0
    assert floor.passes(0.62, None)  # a strong cosine alone is enough
    assert floor.passes(0.25, 3.1) and not floor.passes(0.25, None)  # a keyword match lowers the bar
    assert floor.passes(None, 1.5)  # a keyword match without a known cosine counts
    assert not floor.passes(None, -0.2) and not floor.passes(None, 0.0)  # non-positive BM25 is no evidence
    assert not Floor(min_cosine=0.9, keyword_min_cosine=0.9).passes(0.62, 2.0)
    assert Floor(min_cosine=0.0).passes(0.01, None)


def test_a_mostly_chinese_query_passes_on_keywords_alone() -> None:
    floor = Floor()
    for query in ("天空为什么是蓝色的？", "Python 里怎么反转一个列表？"):
        zh = floor.for_query(query)
        assert not zh.passes(0.9, None) and not zh.passes(0.9, 0.0)  # a cosine alone is no evidence
        assert zh.passes(0.05, 1.2) and zh.passes(None, 1.2)  # a shared term is
    assert floor.for_query("Which Python book did I like?") is floor
    assert floor.for_query("Python 3.12 和 numpy") is floor  # more Latin letters than CJK characters
    assert Floor(cjk_cosine=True).for_query("天空为什么是蓝色的？").passes(0.9, None)


def test_boosts_scale_the_scores_they_list() -> None:
    vector = {"old": 0.80, "new": 0.78, "low": 0.5}
    boost = {"old": recency_factor(365.0, 30.0), "new": recency_factor(1.0, 30.0)}
    out = ranked(fuse(vector, {}, 1.0, 0.0, boost=boost))
    assert [s.id for s in out] == ["new", "old", "low"]
    assert out[1].boost == pytest.approx(recency_factor(365.0, 30.0)) and out[2].boost == 1.0


def test_recency_factor_halves_the_decaying_share_per_half_life() -> None:
    assert recency_factor(0.0, 30.0, 0.5) == 1.0
    assert recency_factor(30.0, 30.0, 0.5) == pytest.approx(0.75)
    assert recency_factor(1e6, 30.0, 0.5) == pytest.approx(0.5)
    assert recency_factor(-5.0, 30.0, 0.5) == 1.0  # clock skew is not "fresher than new"


def test_importance_factor_and_the_boost_of_a_memory() -> None:
    assert importance_factor(1.0, 0.3) == 1.0
    assert importance_factor(0.0, 0.3) == pytest.approx(0.7)
    assert importance_factor(7.0, 0.3) == 1.0  # clamped to [0, 1]
    assert boost_of(900.0, 0.2, None, 0.0) == 1.0  # both off: the defaults change nothing
    assert boost_of(30.0, 0.0, 30.0, 0.3) == pytest.approx(0.7 * 0.75)


_scores = st.dictionaries(
    st.tuples(st.sampled_from("fi"), st.integers(0, 40)),
    # Few distinct values, so that ties (and the tie-breaks) happen often.
    st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.9, 1.0, -0.2, 3.5, 7.25]),
    max_size=30,
)
_weights = st.floats(0.0, 1.0)


@given(vector=_scores, bm25=_scores, wv=_weights, method=st.sampled_from(["minmax", "max"]))
def test_every_candidate_is_ranked_once_best_first_within_the_weights(
    vector: dict[Key, float], bm25: dict[Key, float], wv: float, method: Normalisation
) -> None:
    fused = fuse(vector, bm25, wv, 1.0 - wv, bm25_norm=method)
    assert sorted(fused.keys) == sorted({**vector, **bm25})
    assert fused.score == sorted(fused.score, reverse=True)
    assert all(-1e-9 <= s <= 1.0 + 1e-9 for s in fused.score)
    for i, key in enumerate(fused.keys):
        assert fused.vector_raw[i] == vector.get(key) and fused.bm25_raw[i] == bm25.get(key)
        assert (fused.vector_norm[i] == 0.0) if key not in vector else 0.0 <= fused.vector_norm[i] <= 1.0
    if vector:
        assert max(fused.vector_norm) == 1.0  # the best cosine is the best


@given(vector=_scores, bm25=_scores, wv=_weights)
def test_the_order_is_score_then_vector_then_bm25_then_the_ids_text(
    vector: dict[Key, float], bm25: dict[Key, float], wv: float
) -> None:
    fused = fuse(vector, bm25, wv, 1.0 - wv)
    keys = [(-fused.score[i], -fused.vector_norm[i], -fused.bm25_norm[i], str(fused.keys[i])) for i in range(len(fused))]
    assert keys == sorted(keys)


@given(vector=_scores, bm25=_scores)
def test_the_order_of_the_input_does_not_change_the_ranking(vector: dict[Key, float], bm25: dict[Key, float]) -> None:
    forward = fuse(vector, bm25, 0.6, 0.4)
    backward = fuse(dict(reversed(vector.items())), dict(reversed(bm25.items())), 0.6, 0.4)
    assert forward == backward


@given(vector=_scores, bm25=_scores, factor=st.floats(0.05, 1.0))
def test_a_boost_multiplies_its_candidates_score_and_a_boost_of_one_is_none(
    vector: dict[Key, float], bm25: dict[Key, float], factor: float
) -> None:
    plain = fuse(vector, bm25, 0.6, 0.4)
    assert fuse(vector, bm25, 0.6, 0.4, boost=dict.fromkeys(plain.keys, 1.0)) == plain
    boosted = fuse(vector, bm25, 0.6, 0.4, boost=dict.fromkeys(plain.keys[:1], factor))
    before = dict(zip(plain.keys, plain.score, strict=True))
    after = dict(zip(boosted.keys, boosted.score, strict=True))
    for i, key in enumerate(boosted.keys):
        expected = before[key] * (factor if key in plain.keys[:1] else 1.0)
        assert after[key] == pytest.approx(expected) and boosted.boost[i] == (factor if key in plain.keys[:1] else 1.0)
