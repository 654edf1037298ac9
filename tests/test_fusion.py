"""Score fusion: normalisation, ranking, the relevance floor and the optional factors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.memory.fusion import (
    Floor,
    Normalisation,
    Part,
    fuse,
    fuse_arrays,
    importance_factor,
    normalise,
    recency_factor,
)


def test_minmax_maps_onto_zero_one() -> None:
    assert normalise({"a": 2.0, "b": 4.0, "c": 3.0}) == {"a": 0.0, "b": 1.0, "c": 0.5}


def test_max_anchors_the_low_end_at_zero() -> None:
    assert normalise({"a": 2.0, "b": 4.0}, "max") == {"a": 0.5, "b": 1.0}
    # Negative scores (rank_bm25 on tiny corpora) still land in [0, 1].
    assert normalise({"a": -1.0, "b": 3.0}, "max") == {"a": 0.0, "b": 1.0}


@pytest.mark.parametrize("method", ["minmax", "max"])
def test_equal_scores_are_all_best_and_empty_is_empty(method: Normalisation) -> None:
    assert normalise({"a": 0.3, "b": 0.3}, method) == {"a": 1.0, "b": 1.0}
    assert normalise({}, method) == {}


def test_fuse_weights_normalised_parts_and_keeps_raw() -> None:
    ranked = fuse({"a": 0.8, "b": 0.4}, {"b": 6.0, "c": 2.0}, 0.6, 0.4, floor=None)
    by_id = {s.id: s for s in ranked}
    assert by_id["a"].vector == Part(0.8, 1.0)
    assert by_id["a"].bm25 == Part(None, 0.0)
    assert by_id["b"].score == pytest.approx(0.6 * 0.0 + 0.4 * 1.0)
    assert by_id["c"].vector == Part(None, 0.0)
    assert by_id["c"].bm25.norm == pytest.approx(2.0 / 6.0)
    assert [s.id for s in ranked] == ["a", "b", "c"]


def test_fuse_sorts_by_score_descending() -> None:
    vector = {f"d{i}": 0.4 + i / 100 for i in range(10)}
    bm25 = {f"d{i}": float(i % 3) + 1 for i in range(10)}
    scores = [s.score for s in fuse(vector, bm25, 0.6, 0.4, floor=None)]
    assert scores == sorted(scores, reverse=True)


def test_ties_are_broken_deterministically() -> None:
    vector = {"b": 0.5, "a": 0.5, "c": 0.5}
    first = [s.id for s in fuse(vector, {}, 1.0, 0.0, floor=None)]
    second = [s.id for s in fuse(dict(reversed(vector.items())), {}, 1.0, 0.0, floor=None)]
    assert first == second == ["a", "b", "c"]


def test_nothing_is_returned_when_nothing_is_relevant() -> None:
    # Min-max alone would crown "b" with 1.0.
    assert fuse({"a": 0.05, "b": 0.12}, {}, 0.6, 0.4) == []


def test_a_strong_cosine_alone_is_enough() -> None:
    ranked = fuse({"a": 0.62, "b": 0.08}, {}, 0.6, 0.4)
    assert [s.id for s in ranked] == ["a"]


def test_a_keyword_match_lowers_the_cosine_bar() -> None:
    ranked = fuse({"a": 0.25, "b": 0.25}, {"a": 3.1}, 0.6, 0.4)
    assert [s.id for s in ranked] == ["a"]


def test_a_keyword_match_without_a_known_cosine_counts() -> None:
    assert [s.id for s in fuse({}, {"a": 1.5}, 0.6, 0.4)] == ["a"]


def test_non_positive_bm25_is_no_evidence() -> None:
    assert fuse({}, {"a": -0.2, "b": 0.0}, 0.6, 0.4) == []


def test_floor_thresholds_are_parameters() -> None:
    strict = Floor(min_cosine=0.9, keyword_min_cosine=0.9)
    assert fuse({"a": 0.62}, {"a": 2.0}, 0.6, 0.4, floor=strict) == []
    loose = Floor(min_cosine=0.0)
    assert [s.id for s in fuse({"a": 0.01}, {}, 0.6, 0.4, floor=loose)] == ["a"]


def test_min_score_applies_to_the_fused_score() -> None:
    vector = {"a": 0.9, "b": 0.5}
    ranked = fuse(vector, {}, 0.6, 0.4, floor=Floor(min_cosine=0.4, min_score=0.1))
    assert [s.id for s in ranked] == ["a"]  # b normalises to 0


def test_factors_are_off_by_default() -> None:
    ranked = fuse({"a": 0.9, "b": 0.5}, {}, 1.0, 0.0, floor=None, ages_days={"a": 900.0})
    assert all(s.boost == 1.0 for s in ranked)


def test_recency_decay_favours_recent_memories() -> None:
    vector = {"old": 0.80, "new": 0.78, "low": 0.5}
    ages = {"old": 365.0, "new": 1.0, "low": 0.0}
    ranked = fuse(vector, {}, 1.0, 0.0, floor=None, ages_days=ages, half_life_days=30.0)
    assert [s.id for s in ranked][:2] == ["new", "old"]
    assert ranked[1].boost == pytest.approx(recency_factor(365.0, 30.0, 0.5))


def test_recency_factor_halves_the_decaying_share_per_half_life() -> None:
    assert recency_factor(0.0, 30.0, 0.5) == 1.0
    assert recency_factor(30.0, 30.0, 0.5) == pytest.approx(0.75)
    assert recency_factor(1e6, 30.0, 0.5) == pytest.approx(0.5)
    assert recency_factor(-5.0, 30.0, 0.5) == 1.0  # clock skew is not "fresher than new"


def test_importance_scales_the_score() -> None:
    vector = {"trivia": 0.80, "allergy": 0.78, "x": 0.1}
    importances = {"trivia": 0.1, "allergy": 1.0}
    ranked = fuse(vector, {}, 1.0, 0.0, floor=None, importances=importances)
    assert [s.id for s in ranked][:2] == ["allergy", "trivia"]
    assert importance_factor(1.0, 0.3) == 1.0
    assert importance_factor(0.0, 0.3) == pytest.approx(0.7)
    assert importance_factor(7.0, 0.3) == 1.0  # clamped to [0, 1]


_scores = st.dictionaries(
    st.tuples(st.sampled_from("fi"), st.integers(0, 40)),
    # Few distinct values, so that ties (and the tie-breaks) happen often.
    st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.9, 1.0, -0.2, 3.5, 7.25]),
    max_size=30,
)


@given(vector=_scores, bm25=_scores, method=st.sampled_from(["minmax", "max"]))
def test_fuse_arrays_is_fuse_on_arrays(
    vector: dict[tuple[str, int], float], bm25: dict[tuple[str, int], float], method: Normalisation
) -> None:
    fused = fuse_arrays(vector, bm25, 0.6, 0.4, vector_norm="minmax", bm25_norm=method)
    expected = fuse(vector, bm25, 0.6, 0.4, floor=None, vector_norm="minmax", bm25_norm=method)
    assert [fused.scored(i) for i in range(len(fused))] == expected
