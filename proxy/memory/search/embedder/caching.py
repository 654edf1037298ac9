"""An embedder over an encoder, keeping recent embeddings by text (a repeated query costs nothing)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from .embedder_protocol import Vectors


class Encoder(Protocol):
    dim: int

    def encode(self, texts: list[str]) -> Vectors: ...


class CachingEmbedder:
    """``encoder``'s unit vectors under ``name``; the last ``cache_size`` texts' vectors kept. Thread-safe."""

    def __init__(self, name: str, encoder: Encoder, cache_size: int = 1024) -> None:
        self.name = name
        self.encoder = encoder
        self.dim = encoder.dim
        self._cache: OrderedDict[str, Vectors] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> Vectors:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        missing = [i for i, t in enumerate(texts) if not self._cached(t, out, i)]
        if missing:
            fresh = self.encoder.encode([texts[i] for i in missing])
            out[missing] = fresh
            self._remember([texts[i] for i in missing], fresh)
        return out

    def cached(self, text: str) -> Vectors | None:
        """``text``'s vector if it is still kept (a copy), else None: nothing is computed."""
        hit = self._kept(text)
        return None if hit is None else hit.copy()

    def _cached(self, text: str, out: Vectors, row: int) -> bool:
        hit = self._kept(text)
        if hit is None:
            return False
        out[row] = hit
        return True

    def _kept(self, text: str) -> Vectors | None:
        with self._lock:
            hit = self._cache.get(text)
            if hit is not None:
                self._cache.move_to_end(text)
            return hit

    def _remember(self, texts: list[str], vectors: Vectors) -> None:
        if self._cache_size <= 0:
            return
        with self._lock:
            for text, vector in zip(texts, vectors, strict=True):
                self._cache[text] = vector.copy()  # a copy: callers may write to their array
                self._cache.move_to_end(text)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
