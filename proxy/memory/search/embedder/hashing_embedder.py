"""The hashing fake: a deterministic, dependency-free embedder for tests and the eval's ablations."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from ..bm25 import tokenize
from .embedder_protocol import Vectors

TERM_WEIGHT = 1.0
TRIGRAM_WEIGHT = 0.5


class HashEmbedder:
    """Feature hashing of terms and character trigrams.

    Texts sharing search terms (``tokenize``) or spelling land close together;
    meaning is not captured. Same text, same vector, in every process. A text
    with no terms hashes its raw words, and the empty text a fixed feature,
    so every row has unit length.
    """

    def __init__(self, dim: int = 256) -> None:
        if dim < 8:
            raise ValueError(f"HashEmbedder needs dim >= 8, got {dim}")
        self.dim = dim
        self.name = f"hash:{dim}"

    def embed(self, texts: Sequence[str]) -> Vectors:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature, weight in _features(text):
                out[row, self._slot(feature)] += weight
        # Weights are positive, so no row is zero: texts sharing nothing score
        # ~0 (collisions aside), never below, much like a real model's cosine.
        unit: Vectors = out / np.linalg.norm(out, axis=1, keepdims=True)
        return unit

    def _slot(self, feature: str) -> int:
        digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
        return int.from_bytes(digest, "little") % self.dim


def _features(text: str) -> list[tuple[str, float]]:
    terms = tokenize(text) or text.casefold().split() or ["\x00empty"]
    features = [("t:" + term, TERM_WEIGHT) for term in terms]
    for term in terms:
        padded = f"#{term}#"
        features.extend(("g:" + padded[i : i + 3], TRIGRAM_WEIGHT) for i in range(len(padded) - 2))
    return features
