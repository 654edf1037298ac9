"""Scoring one question: evidence presence, answer presence, recall@k and NDCG@k. Pure functions.

Evidence presence (the protocol's measure) reads what was forwarded; answer
presence reads it for the question's answer, since a fact's paraphrase (a
memory item, a summary) is not its turn; recall and NDCG read the ranked
candidates, so they say whether the retriever found the turns, whatever the
budget then let through.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Collection, Iterable, Sequence

from .locomo import normalise


def presence(evidence: Sequence[str], forwarded: str) -> float:
    """The fraction of ``evidence`` texts that appear verbatim (whitespace-normalised) in ``forwarded``."""
    if not evidence:
        return 0.0
    haystack = normalise(forwarded)
    return sum(normalise(text) in haystack for text in evidence) / len(evidence)


_ARTICLES = frozenset({"a", "an", "the"})
_LABEL = re.compile(r"^(?:User|Assistant): ")


def normalise_answer(text: str) -> str:
    """An answer as it is compared: NFKC, case-folded, punctuation as spaces, no articles, one space."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    spaced = "".join(" " if unicodedata.category(c).startswith(("P", "S")) else c for c in folded)
    return " ".join(w for w in spaced.split() if w not in _ARTICLES)


def answer_presence(answer: str, forwarded: str, own: Collection[str] = ()) -> float:
    """1.0 when the normalised ``answer`` appears, as whole words, in ``forwarded``, else 0.0.

    Lines that are the eval's own words — ``own``: the questions it asked and
    the replies it recorded, whitespace-normalised; as a message or as a
    recalled ``User:`` / ``Assistant:`` line — are not read, so neither the
    question itself nor an earlier question's recorded answer counts.
    """
    wanted = normalise_answer(answer)
    if not wanted:
        return 0.0
    kept = (ln for ln in forwarded.splitlines() if normalise(_LABEL.sub("", ln)) not in own)
    return float(f" {wanted} " in f" {normalise_answer(' '.join(kept))} ")


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
