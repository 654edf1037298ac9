"""Hybrid score fusion: vector similarity and BM25 into one ranked list, with optional boosts.

Pure functions over mappings of candidate id → raw score, computed on arrays
(one implementation, used by recall on the request path and by the admin
search). The caller gathers the candidates (vector top-N ∪ BM25 matches);
ideally it passes the raw cosine of *every* candidate, since the relevance
floor reads it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Collection, Hashable, Mapping
from dataclasses import dataclass
from typing import Generic, Literal, NamedTuple, TypeVar

import numpy as np

from .bm25 import mostly_cjk

K = TypeVar("K", bound=Hashable)

Normalisation = Literal["minmax", "max"]

# The share of a memory's score that time never takes away (see ``recency_factor``).
RECENCY_FLOOR = 0.5


class Part(NamedTuple):
    """One signal of a candidate: ``raw`` as given (None when absent), ``norm`` in [0, 1]."""

    raw: float | None
    norm: float


class Scored(NamedTuple, Generic[K]):
    """A fused candidate, with its parts kept for traces.

    ``score`` = (vector_weight × vector.norm + bm25_weight × bm25.norm) × ``boost``,
    where ``boost`` is the product of the recency and importance factors.
    Named tuples, not dataclasses: a request makes ~120 of them (three
    objects each), and a frozen dataclass costs ~4x as much to build.
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
    as a gate on the query (some top candidate must pass), the admin search
    on each candidate.
    """

    min_cosine: float = 0.35
    keyword_min_cosine: float = 0.20
    # BM25 is > 0 only for terms in fewer than half the documents: a match on
    # a term that common (or in a corpus of one or two documents) is no evidence.
    min_bm25: float = 0.0
    # Whether cosines between CJK texts are evidence. The bundled (English)
    # MiniLM's are not: a Chinese question scores as close to another user's
    # Chinese turns as to the turns that answer it (docs/recall.md), so a
    # mostly-CJK query passes on a keyword match (jieba-segmented BM25) alone.
    cjk_cosine: bool = False

    def for_query(self, query: str) -> Floor:
        """The floor for ``query``: keyword evidence only when its script is one whose cosines mean nothing."""
        if self.cjk_cosine or not mostly_cjk(query):
            return self
        return dataclasses.replace(self, min_cosine=math.inf, keyword_min_cosine=-math.inf)

    def passes(self, cosine: float | None, bm25: float | None) -> bool:
        if cosine is not None and cosine >= self.min_cosine:
            return True
        keyword = bm25 is not None and bm25 > self.min_bm25
        return keyword and (cosine is None or cosine >= self.keyword_min_cosine)


def recency_factor(age_days: float, half_life_days: float, floor: float = RECENCY_FLOOR) -> float:
    """floor + (1 - floor) × 0.5^(age / half_life): halves the decaying share every half-life."""
    decay = math.pow(0.5, max(age_days, 0.0) / half_life_days)
    return floor + (1.0 - floor) * decay


def importance_factor(importance: float, weight: float) -> float:
    """(1 - weight) + weight × importance: importance 1 keeps the score, 0 scales it by 1 - weight."""
    return (1.0 - weight) + weight * min(max(importance, 0.0), 1.0)


def boost_of(age_days: float, importance: float, half_life_days: float | None, importance_weight: float) -> float:
    """A memory's boost: its importance factor × its recency factor (none without a half-life)."""
    recency = 1.0 if half_life_days is None else recency_factor(age_days, half_life_days)
    return importance_factor(importance, importance_weight) * recency


@dataclass(frozen=True)
class Fused(Generic[K]):
    """``fuse``'s result as parallel lists in fused order, without an object per candidate.

    ``scored(i)`` is the i-th candidate as one object; the request path builds
    it only for the few it keeps.
    """

    keys: list[K]
    vector_raw: list[float | None]
    vector_norm: list[float]
    bm25_raw: list[float | None]
    bm25_norm: list[float]
    score: list[float]
    boost: list[float]

    def __len__(self) -> int:
        return len(self.keys)

    def scored(self, i: int) -> Scored[K]:
        return Scored(
            self.keys[i],
            Part(self.vector_raw[i], self.vector_norm[i]),
            Part(self.bm25_raw[i], self.bm25_norm[i]),
            self.score[i],
            self.boost[i],
        )


def fuse(
    vector: Mapping[K, float],
    bm25: Mapping[K, float],
    vector_weight: float,
    bm25_weight: float,
    *,
    vector_norm: Normalisation = "minmax",
    bm25_norm: Normalisation = "max",
    boost: Mapping[K, float] | None = None,
) -> Fused[K]:
    """Fuse raw cosine similarities and raw BM25 scores into a ranked list.

    Candidates are the union of both mappings; one missing from a mapping
    scores 0 there after normalisation (its ``raw`` is None). Normalisation
    runs over all candidates given. ``boost`` multiplies the weighted sum of
    the candidates it lists (1 for the others). Sorted by score, then vector,
    then BM25 (descending), then ``str(id)``, so equal inputs always give the
    same order.
    """
    keys = list({**vector, **bm25})
    v = np.array([vector.get(k, math.nan) for k in keys], dtype=np.float64)
    b = np.array([bm25.get(k, math.nan) for k in keys], dtype=np.float64)
    factor = np.array([boost.get(k, 1.0) for k in keys] if boost else np.ones(len(keys)), dtype=np.float64)
    vn, bn = _normalised(v, vector_norm), _normalised(b, bm25_norm)
    score = (vector_weight * vn + bm25_weight * bn) * factor
    order = _order(keys, score, vn, bn)
    raw_v, raw_b = v[order].tolist(), b[order].tolist()
    return Fused(
        [keys[i] for i in order.tolist()],
        [None if math.isnan(x) else x for x in raw_v],
        vn[order].tolist(),
        [None if math.isnan(x) else x for x in raw_b],
        bn[order].tolist(),
        score[order].tolist(),
        factor[order].tolist(),
    )


def matches(
    vector: Mapping[K, float],
    keyword: Mapping[K, float],
    literal: Collection[K],
    query: str,
    weights: tuple[float, float],
    limit: int,
    usable: Callable[[K], bool] = lambda _: True,
) -> list[Scored[K]]:
    """What an admin search shows, best first: fused candidates that clear the query's ``Floor``,
    and every ``literal`` match (the query's text found as it is) whatever its scores; at most
    ``limit``, each ``usable``."""
    fused = fuse(vector, {**dict.fromkeys(literal, 0.0), **keyword}, weights[0], weights[1])
    floor = Floor().for_query(query)
    found: list[Scored[K]] = []
    for i in range(len(fused)):  # in fused order: stop at a page
        s = fused.scored(i)
        if usable(s.id) and (s.id in literal or floor.passes(s.vector.raw, s.bm25.raw)):
            found.append(s)
            if len(found) == limit:
                break
    return found


def _order(keys: list[K], score: np.ndarray, vn: np.ndarray, bn: np.ndarray) -> np.ndarray:
    """Best first: by score, then vector, then BM25 (descending), then ``str(id)``.

    np.lexsort sorts by its last key first, and stably: the ids' strings (~0.2 ms
    for 400 candidates) are only made when two candidates tie on all three scores.
    """
    if not keys:
        return np.zeros(0, np.int64)
    order = np.lexsort((-bn, -vn, -score))
    s, v, b = score[order], vn[order], bn[order]
    if not ((s[1:] == s[:-1]) & (v[1:] == v[:-1]) & (b[1:] == b[:-1])).any():
        return order
    return np.lexsort((np.array([str(k) for k in keys]), -bn, -vn, -score))


def _normalised(scores: np.ndarray, method: Normalisation) -> np.ndarray:
    """Present (non-NaN) scores into [0, 1], order kept; an absent one gets 0.

    ``minmax``: (s - min) / (max - min). ``max``: the same with the low end
    anchored at min(0, min), i.e. s / max for non-negative scores — the
    weakest candidate keeps a share proportional to its score instead of
    dropping to 0, which suits BM25 where every listed candidate did match.
    When all scores are equal, every candidate gets 1.0 (each is the best).
    """
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
