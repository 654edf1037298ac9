"""A sentence-transformers model run by torch in this process: the fallback, and the exporter's source.

Needs the ``sentence-transformers`` extra (torch); the bundled model comes here only with
``embedding.backend: torch``.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from .embedder_protocol import Vectors

BATCH_SIZE = 32  # sentence-transformers' batches
# What brings torch and sentence-transformers: not installed by default.
EXTRA = "pip install 'paperclip-proxy[sentence-transformers]'"
EXTRA_MODULES = ("torch", "sentence_transformers", "transformers")
TORCH_THREADS = 1


def load_sentence_transformer(path: str, *, cross_encoder: bool = False) -> Any:
    """The model at ``path`` (a folder or a hub name) on CPU, one intra-op thread, offline where it can be.

    ``cross_encoder``: a sentence-transformers ``CrossEncoder`` (``memory.rerank``) rather than a bi-encoder.
    """
    # Read by huggingface_hub at import, hence before importing
    # sentence_transformers; a user's explicit setting wins. A local folder
    # (the bundled model) never needs the network.
    if os.path.isdir(path):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    # Imported here: sentence_transformers pulls in torch and takes seconds.
    try:
        import torch
        from sentence_transformers import CrossEncoder, SentenceTransformer
        from transformers.utils import logging
    except ModuleNotFoundError as exc:
        if exc.name not in EXTRA_MODULES:
            raise
        raise ImportError(f"the model {path!r} runs on torch, which needs: {EXTRA}") from exc

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
        return (CrossEncoder if cross_encoder else SentenceTransformer)(path, device="cpu")
    finally:
        if bars:
            hf_logging.enable_progress_bar()


def dimension(model: Any) -> int:
    get = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    dim = get()
    if not isinstance(dim, int):
        raise ValueError("the embedding model does not report a fixed dimension")
    return dim


class TorchEncoder:
    """Encodes with the sentence-transformers model itself (any module stack it supports)."""

    def __init__(self, path: str) -> None:
        self.model = load_sentence_transformer(path)
        self.dim = dimension(self.model)

    def encode(self, texts: list[str]) -> Vectors:
        vectors = self.model.encode(
            texts,
            batch_size=BATCH_SIZE,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), self.dim)
