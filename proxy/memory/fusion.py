"""Hybrid score fusion: vector similarity and BM25 into one ranked, floored list.

Pure functions over mappings of candidate id → raw score. The caller gathers
the candidates (vector top-N ∪ BM25 matches); ideally it passes the raw cosine
of *every* candidate, since the relevance floor reads it.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

import numpy as np

K = TypeVar("K", bound=Hashable)

Normalisation = Literal["minmax", "max"]


@dataclass(frozen=True)
class Part:
    """One signal of a candidate: ``raw`` as given (None when absent), ``norm`` in [0, 1]."""

    raw: float | None
    norm: float


@dataclass(frozen=True)
class Scored(Generic[K]):
    """A fused candidate, with its parts kept for traces.

    ``score`` = (vector_weight × vector.norm + bm25_weight × bm25.norm) × ``boost``,
    where ``boost`` is the product of the optional recency and importance factors.
    """

    id: K
    vector: Part
    bm25: Part
    score: float
    boost: float = 1.0


@dataclass(frozen=True)
class Floor:
    """Absolute evidence of relevance, read off raw scores.

    Normalised scores are relative (the best candidate always gets 1.0), so
    they cannot say "nothing here is relevant"; these thresholds look at raw
    scores instead. A candidate passes when its raw cosine is at least
    ``min_cosine``, or when it matches the query's keywords (raw BM25 above
    ``min_bm25``) and its cosine, if known, is at least ``keyword_min_cosine``.
    Defaults were read off all-MiniLM-L6-v2, where paraphrases score ~0.4–0.7
    and unrelated English sentences ~0.0–0.25, and checked on LoCoMo; they
    mean little for other embedders (HashEmbedder is lexical). Recall uses it
    as a gate on the query (some top candidate must pass); ``fuse`` can also
    apply it to every candidate.
    """

    min_cosine: float = 0.35
    keyword_min_cosine: float = 0.20
    # BM25 is > 0 only for terms in fewer than half the documents: a match on
    # a term that common (or in a corpus of one or two documents) is no evidence.
    min_bm25: float = 0.0
    # Applied last, to the fused score (after boosts); 0 keeps everything that
    # passed the evidence test.
    min_score: float = 0.0

    def passes(self, cosine: float | None, bm25: float | None) -> bool:
        if cosine is not None and cosine >= self.min_cosine:
            return True
        keyword = bm25 is not None and bm25 > self.min_bm25
        return keyword and (cosine is None or cosine >= self.keyword_min_cosine)


DEFAULT_FLOOR = Floor()


def normalise(scores: Mapping[K, float], method: Normalisation = "minmax") -> dict[K, float]:
    """Map scores into [0, 1], preserving order.

    ``minmax``: (s - min) / (max - min). ``max``: the same with the low end
    anchored at min(0, min), i.e. s / max for non-negative scores — the
    weakest candidate keeps a share proportional to its score instead of
    dropping to 0, which suits BM25 where every listed candidate did match.
    When all scores are equal, every candidate gets 1.0 (each is the best).
    """
    if not scores:
        return {}
    hi = max(scores.values())
    lo = min(scores.values())
    if method == "max":
        lo = min(lo, 0.0)
    if hi == lo:
        return dict.fromkeys(scores, 1.0)
    span = hi - lo
    return {k: (s - lo) / span for k, s in scores.items()}


def recency_factor(age_days: float, half_life_days: float, floor: float) -> float:
    """floor + (1 - floor) × 0.5^(age / half_life): halves the decaying share every half-life."""
    decay = math.pow(0.5, max(age_days, 0.0) / half_life_days)
    return floor + (1.0 - floor) * decay


def importance_factor(importance: float, weight: float) -> float:
    """(1 - weight) + weight × importance: importance 1 keeps the score, 0 scales it by 1 - weight."""
    return (1.0 - weight) + weight * min(max(importance, 0.0), 1.0)


def fuse(
    vector: Mapping[K, float],
    bm25: Mapping[K, float],
    vector_weight: float,
    bm25_weight: float,
    *,
    floor: Floor | None = DEFAULT_FLOOR,
    vector_norm: Normalisation = "minmax",
    bm25_norm: Normalisation = "max",
    ages_days: Mapping[K, float] | None = None,
    half_life_days: float | None = None,
    recency_floor: float = 0.5,
    importances: Mapping[K, float] | None = None,
    importance_weight: float = 0.3,
) -> list[Scored[K]]:
    """Fuse raw cosine similarities and raw BM25 scores into a ranked list.

    Candidates are the union of both mappings; one missing from a mapping
    scores 0 there after normalisation (its ``raw`` is None). Normalisation
    runs over all candidates given, before the floor drops the irrelevant
    ones (``floor=None`` keeps them all). Recency decay applies only when
    ``half_life_days`` is set, to candidates listed in ``ages_days``;
    importance applies only when ``importances`` is given, to candidates
    listed there; a candidate not listed gets a factor of 1. Sorted by score,
    then vector, then BM25 (descending), then ``str(id)``, so equal inputs
    always give the same order.
    """
    vn = normalise(vector, vector_norm)
    bn = normalise(bm25, bm25_norm)
    out: list[Scored[K]] = []
    for key in {**vector, **bm25}:
        cos, kw = vector.get(key), bm25.get(key)
        if floor is not None and not floor.passes(cos, kw):
            continue
        boost = _boost(
            key, ages_days, half_life_days, recency_floor, importances, importance_weight
        )
        v, b = Part(cos, vn.get(key, 0.0)), Part(kw, bn.get(key, 0.0))
        score = (vector_weight * v.norm + bm25_weight * b.norm) * boost
        if floor is None or score >= floor.min_score:
            out.append(Scored(key, v, b, score, boost))
    out.sort(key=_rank_key)
    return out


@dataclass(frozen=True)
class Fused(Generic[K]):
    """``fuse``'s result as parallel lists in fused order, without an object per candidate.

    ``scored(i)`` is the i-th ``Scored`` that ``fuse`` (no floor, no boosts)
    would return; the request path builds it only for the few it keeps.
    """

    keys: list[K]
    vector_raw: list[float | None]
    vector_norm: list[float]
    bm25_raw: list[float | None]
    bm25_norm: list[float]
    score: list[float]

    def __len__(self) -> int:
        return len(self.keys)

    def scored(self, i: int) -> Scored[K]:
        return Scored(
            self.keys[i],
            Part(self.vector_raw[i], self.vector_norm[i]),
            Part(self.bm25_raw[i], self.bm25_norm[i]),
            self.score[i],
        )


def fuse_arrays(
    vector: Mapping[K, float],
    bm25: Mapping[K, float],
    vector_weight: float,
    bm25_weight: float,
    *,
    vector_norm: Normalisation = "minmax",
    bm25_norm: Normalisation = "max",
) -> Fused[K]:
    """``fuse(..., floor=None)`` without boosts, computed on arrays: the same scores, the same order."""
    keys = list({**vector, **bm25})
    v = np.array([vector.get(k, math.nan) for k in keys], dtype=np.float64)
    b = np.array([bm25.get(k, math.nan) for k in keys], dtype=np.float64)
    vn, bn = _normalised(v, vector_norm), _normalised(b, bm25_norm)
    score = (vector_weight * vn + bm25_weight * bn) * 1.0
    # np.lexsort sorts by its last key first: score, then vector, then BM25, then str(id), as _rank_key.
    order = np.lexsort((np.array([str(k) for k in keys]), -bn, -vn, -score)) if keys else np.zeros(0, np.int64)
    raw_v, raw_b = v[order].tolist(), b[order].tolist()
    return Fused(
        [keys[i] for i in order.tolist()],
        [None if math.isnan(x) else x for x in raw_v],
        vn[order].tolist(),
        [None if math.isnan(x) else x for x in raw_b],
        bn[order].tolist(),
        score[order].tolist(),
    )


def _normalised(scores: np.ndarray, method: Normalisation) -> np.ndarray:
    """``normalise`` over the present (non-NaN) scores; an absent one gets 0."""
    out = np.zeros(len(scores), dtype=np.float64)
    present = ~np.isnan(scores)
    if not present.any():
        return out
    hi, lo = float(scores[present].max()), float(scores[present].min())
    if method == "max":
        lo = min(lo, 0.0)
    if hi == lo:
        out[present] = 1.0
    else:
        out[present] = (scores[present] - lo) / (hi - lo)
    return out


def _boost(
    key: K,
    ages_days: Mapping[K, float] | None,
    half_life_days: float | None,
    recency_floor: float,
    importances: Mapping[K, float] | None,
    importance_weight: float,
) -> float:
    boost = 1.0
    if half_life_days is not None and ages_days is not None and key in ages_days:
        boost *= recency_factor(ages_days[key], half_life_days, recency_floor)
    if importances is not None and key in importances:
        boost *= importance_factor(importances[key], importance_weight)
    return boost


def _rank_key(s: Scored[K]) -> tuple[float, float, float, str]:
    return (-s.score, -s.vector.norm, -s.bm25.norm, str(s.id))
