"""An exported encoder on ONNX Runtime: tokenised by ``tokenizers``, mean-pooled and normalised in numpy."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import numpy.typing as npt

from .embedder_protocol import Vectors

# One session with one intra-op thread; a call's batches run on up to
# BATCH_WORKERS threads at once. Small batches side by side beat big ones on
# two intra-op threads for short texts (64-message calls of the benchmark's
# sentences: 8 a batch on 2 workers 292 texts/s; 16 269; 32 on a 2-thread
# session 192-222).
ONNX_BATCH = 8
BATCH_WORKERS = 2
# At most this many attention cells (texts x tokens x tokens) in one batch
# (8 texts of 128 tokens, 2 of 256): batches of 32 texts of 256 tokens left
# the process at ~1.1 GB for good, the freed activations kept; long texts
# gain nothing from large batches (compute-bound there).
ATTENTION_CELLS = 8 * 128 * 128

Feeds = dict[str, npt.NDArray[np.int64]]


def features(tokenizer: Any, texts: list[str], inputs: list[str]) -> Feeds:
    """What the encoder takes, from the ``tokenizers`` library alone (the exporting child uses this too)."""
    encodings = tokenizer.encode_batch(texts)
    columns = {
        "input_ids": [e.ids for e in encodings],
        "attention_mask": [e.attention_mask for e in encodings],
        "token_type_ids": [e.type_ids for e in encodings],
    }
    return {name: np.asarray(columns[name], dtype=np.int64) for name in inputs}


class OnnxEncoder:
    """The graph ``onnx_export`` writes, with its tokenizer; thread-safe.

    One session, one intra-op thread (no spinning against the event loop);
    a call of many texts runs its batches on ``BATCH_WORKERS`` threads side
    by side, a query runs on the caller's thread. ONNX Runtime sessions are
    thread-safe; the tokenizer is used under a lock all the same (the
    ``tokenizers`` bindings borrow it mutably on some calls).
    """

    def __init__(self, graph: bytes, tokenizer_json: str, inputs: list[str], dim: int) -> None:
        from tokenizers import Tokenizer

        self._tokenizer = Tokenizer.from_str(tokenizer_json)
        self._tokenizer_lock = threading.Lock()
        self._inputs = inputs
        self.dim = dim
        self._session = _session(graph)
        workers = max(1, min(BATCH_WORKERS, os.cpu_count() or 1))
        self._workers = ThreadPoolExecutor(workers, thread_name_prefix="paperclip-onnx")

    def encode(self, texts: list[str]) -> Vectors:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        with self._tokenizer_lock:
            feeds = features(self._tokenizer, texts, self._inputs)  # padded to the longest
        batches = _batches(feeds)
        if len(batches) == 1:
            vectors = [self._run(batches[0][1])]
        else:
            vectors = list(self._workers.map(self._run, [b for _, b in batches]))
        for (rows, _), part in zip(batches, vectors, strict=True):
            out[rows] = part
        return out

    def _run(self, feeds: Feeds) -> Vectors:
        (hidden,) = self._session.run(["last_hidden_state"], feeds)
        mask = feeds["attention_mask"].astype(np.float32)[:, :, None]
        pooled = (np.asarray(hidden, dtype=np.float32) * mask).sum(axis=1)
        pooled /= np.maximum(mask.sum(axis=1), 1e-9)
        norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        unit: Vectors = (pooled / norms).astype(np.float32, copy=False)
        return unit


def _batches(feeds: Feeds) -> list[tuple[npt.NDArray[np.intp], Feeds]]:
    """Longest first, ONNX_BATCH texts a batch, each cut to its own longest text.

    Similar lengths pad little (sorted by tokens, not characters); long texts
    go in smaller batches (ATTENTION_CELLS).
    """
    lengths = feeds["attention_mask"].sum(axis=1)
    order = np.argsort(-lengths, kind="stable")
    batches = []
    start = 0
    while start < len(order):
        width = int(lengths[order[start]])
        size = max(1, min(ONNX_BATCH, ATTENTION_CELLS // max(width * width, 1)))
        rows = order[start : start + size]
        batches.append((rows, {name: v[rows, :width] for name, v in feeds.items()}))
        start += size
    return batches


def _session(graph: bytes) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    # Idle workers sleep instead of spinning against the event loop.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    # No arena: it keeps the high-water mark of activations for good (a batch
    # of 32 texts of 256 tokens left the process at 1.6 GB instead of ~1 GB),
    # and measured no faster here.
    options.enable_cpu_mem_arena = False
    options.log_severity_level = 3  # errors only
    return ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])
