"""What an embedder is: texts in, unit vectors out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

Vectors = npt.NDArray[np.float32]


class Embedder(Protocol):
    """Maps texts to unit vectors.

    ``embed`` returns float32 of shape (len(texts), dim) with L2-normalised
    rows, so a dot product is the cosine similarity. ``name`` identifies the
    vector space: vectors from embedders of different names do not compare.
    ``embed`` is synchronous and CPU-bound; callers run it in a worker thread.
    """

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> Vectors: ...


@runtime_checkable
class Cached(Protocol):
    """An embedder that keeps recent vectors by text: ``cached`` answers one without computing it."""

    def cached(self, text: str) -> Vectors | None: ...
