"""Scoring one question: evidence presence, recall@k and NDCG@k. Pure functions.

Evidence presence (the protocol's measure) reads what was forwarded; recall
and NDCG read the ranked candidates, so they say whether the retriever found
the turns, whatever the budget then let through.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from .locomo import normalise


def presence(evidence: Sequence[str], forwarded: str) -> float:
    """The fraction of ``evidence`` texts that appear verbatim (whitespace-normalised) in ``forwarded``."""
    if not evidence:
        return 0.0
    haystack = normalise(forwarded)
    return sum(normalise(text) in haystack for text in evidence) / len(evidence)


def recall_at(ranked: Sequence[Iterable[str]], targets: set[str], k: int) -> float:
    """The share of ``targets`` named by the first ``k`` ranked candidates (each names a set of ids)."""
    if not targets:
        return 0.0
    found = {t for ids in ranked[:k] for t in ids if t in targets}
    return len(found) / len(targets)


def ndcg_at(ranked: Sequence[Iterable[str]], targets: set[str], k: int) -> float:
    """Binary-relevance NDCG@k: a candidate gains 1 when it names a target not named before it."""
    if not targets:
        return 0.0
    seen: set[str] = set()
    dcg = 0.0
    for rank, ids in enumerate(ranked[:k]):
        new = {t for t in ids if t in targets and t not in seen}
        if new:
            seen |= new
            dcg += 1.0 / math.log2(rank + 2)
    ideal = sum(1.0 / math.log2(r + 2) for r in range(min(len(targets), k)))
    return dcg / ideal
