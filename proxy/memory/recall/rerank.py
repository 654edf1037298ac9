"""Re-ranking (``memory.rerank``): a cross-encoder reads the query with each of the best candidates.

A bi-encoder embeds query and turn apart; a cross-encoder reads them
together, which ranks better and costs a model pass per candidate — so only
the ``memory.rerank_top_n`` best of the fused ranking are re-read, on a
worker thread, and put in the cross-encoder's order (ties keep theirs); the
rest follow unchanged. Off by default: no cross-encoder ships inside a PyPI
package that we found, so the eval could not weigh one (bench/results/2026-12-01-retrieval.md
"Ablations"); an operator names a sentence-transformers CrossEncoder (a
name in the local Hugging Face cache, or a folder).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from ..search.embedder import load_sentence_transformer
from .ranking import Hit


class Reranker(Protocol):
    """Scores (query, text) pairs, higher is more relevant; synchronous and CPU-bound."""

    name: str

    def score(self, query: str, texts: Sequence[str]) -> list[float]: ...


class CrossEncoderReranker:
    """A sentence-transformers CrossEncoder on CPU, loaded as the embedder's torch models are (one thread)."""

    def __init__(self, model: str) -> None:
        self.name = model
        self._model: Any = load_sentence_transformer(model, cross_encoder=True)

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        scores = self._model.predict([(query, t) for t in texts], show_progress_bar=False)
        return [float(s) for s in scores]


def load_rerankers(names: Iterable[str | None]) -> dict[str, Reranker]:
    """One loaded reranker per distinct configured name (the tenants may name different ones)."""
    return {name: CrossEncoderReranker(name) for name in sorted({n for n in names if n})}


def reorder(hits: Sequence[Hit], scores: Sequence[float]) -> list[Hit]:
    """``hits``' first ``len(scores)`` in the order of ``scores`` (highest first, ties stable), then the rest."""
    n = len(scores)
    order = sorted(range(n), key=lambda i: -scores[i])
    return [*(hits[i] for i in order), *hits[n:]]


async def rerank(reranker: Reranker, query: str, hits: Sequence[Hit], top_n: int) -> list[Hit]:
    """The ranking with its ``top_n`` best re-read by ``reranker`` on a worker thread."""
    head = hits[:top_n]
    texts = [_text(h) for h in head]
    scores = await asyncio.to_thread(reranker.score, query, texts)
    return reorder(hits, scores)


def _text(hit: Hit) -> str:
    if hit.item is not None:
        return hit.item.content
    return hit.fragment.text if hit.fragment is not None else ""
