"""Embedders: the hashing fake, the registry, and (slow) the bundled model on ONNX Runtime and torch."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from proxy.memory.search.embedder import (
    BUNDLED_NAME,
    Embedder,
    HashEmbedder,
    OnnxUnavailable,
    SentenceTransformerEmbedder,
    load_embedder,
)
from proxy.memory.search.embedder.export_files import UNSUPPORTED
from proxy.memory.search.embedder.onnx_cache import OnnxCache
from proxy.memory.search.embedder.onnx_encoder import OnnxEncoder
from proxy.memory.search.embedder.onnx_export import _fused, onnx_unsupported
from proxy.memory.search.embedder.sentence_model import bundled_path

TEXTS = [
    "I am allergic to peanuts",
    "peanut allergy",
    "the weather is nice",
    "",
    "the",
    "我对花生过敏",
]


def _assert_unit_rows(vectors: np.ndarray, n: int, dim: int) -> None:
    assert vectors.dtype == np.float32
    assert vectors.shape == (n, dim)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)


def test_hash_embedder_returns_unit_float32_rows() -> None:
    embedder = HashEmbedder(64)
    _assert_unit_rows(embedder.embed(TEXTS), len(TEXTS), 64)
    assert embedder.embed([]).shape == (0, 64)


def test_hash_embedder_is_deterministic() -> None:
    first = HashEmbedder().embed(TEXTS)
    second = HashEmbedder().embed(list(reversed(TEXTS)))[::-1]
    np.testing.assert_array_equal(first, second)


def test_hash_embedder_is_the_same_in_every_process() -> None:
    # Stored vectors outlive the process: str hashing is salted per process.
    code = "from proxy.memory.search.embedder import HashEmbedder; print(HashEmbedder().embed(['peanut allergy 42']).tobytes().hex())"
    runs = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for seed in ("1", "2")
    }
    assert runs == {HashEmbedder().embed(["peanut allergy 42"]).tobytes().hex()}


def test_hash_embedder_puts_shared_terms_close() -> None:
    allergic, allergy, weather = HashEmbedder().embed(TEXTS[:3])
    assert allergic @ allergy > 0.5
    assert allergic @ weather < 0.2
    assert allergic @ weather >= 0.0  # positive features: no negative cosines


def test_hash_embedder_handles_chinese() -> None:
    fact, query, other = HashEmbedder().embed(["我对花生过敏", "我对什么过敏？", "今天天气很好"])
    assert fact @ query > fact @ other


def test_hash_embedder_rejects_tiny_dimensions() -> None:
    with pytest.raises(ValueError, match="dim"):
        HashEmbedder(2)


def test_registry_builds_hash_embedders() -> None:
    default = load_embedder("hash")
    assert (default.name, default.dim) == ("hash:256", 256)
    small = load_embedder("hash:64")
    assert (small.name, small.dim) == ("hash:64", 64)
    _assert_unit_rows(small.embed(["x"]), 1, 64)


@pytest.mark.parametrize("spec", ["hash:", "hash:abc", "hash:-3", "hash:4"])
def test_registry_rejects_malformed_hash_specs(spec: str) -> None:
    with pytest.raises(ValueError):
        load_embedder(spec)


def test_hash_embedder_satisfies_the_protocol() -> None:
    embedder: Embedder = HashEmbedder(16)
    assert embedder.dim == 16



def exits(status: int, message: str) -> tuple[str, ...]:
    """An exporter command that only prints ``message`` and exits with ``status``."""
    return (sys.executable, "-c", f"import sys; print({message!r}, file=sys.stderr); sys.exit({status})")


def test_a_model_of_another_shape_is_expected_not_a_failure() -> None:
    with pytest.raises(OnnxUnavailable, match=r"pooling \['cls'\]") as info:
        OnnxCache(None, command=exits(UNSUPPORTED, "pooling ['cls']")).load("some/model")
    assert info.value.expected


def test_backend_onnx_refuses_to_fall_back_to_torch() -> None:
    failing = OnnxCache(None, command=exits(1, "RuntimeError: no exporter today"))
    with pytest.raises(OnnxUnavailable, match="no exporter today") as info:
        SentenceTransformerEmbedder("bundled", backend="onnx", onnx=failing)
    assert not info.value.expected


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("paperclip-cache")


@pytest.fixture(scope="module")
def bundled(cache_dir: Path) -> Embedder:
    return load_embedder("bundled", cache_dir=cache_dir)


@pytest.mark.slow
def test_bundled_model_loads_offline_and_ranks_by_meaning(bundled: Embedder) -> None:
    assert isinstance(bundled, SentenceTransformerEmbedder)
    assert (bundled.name, bundled.dim) == (BUNDLED_NAME, 384)
    fact, query, weather = bundled.embed(
        ["I am allergic to peanuts", "what food allergy do I have?", "the weather is nice"]
    )
    assert fact @ query > fact @ weather + 0.3


@pytest.mark.slow
def test_bundled_model_batches_and_caches(bundled: Embedder) -> None:
    texts = [f"note number {i}" for i in range(70)]  # more than one batch of 32
    vectors = bundled.embed(texts)
    _assert_unit_rows(vectors, 70, 384)
    again = bundled.embed([texts[5], "a new text", texts[69]])
    np.testing.assert_allclose(again[0], vectors[5], atol=1e-6)
    np.testing.assert_allclose(again[2], vectors[69], atol=1e-6)
    again[0] = 0  # the cache hands out copies
    np.testing.assert_allclose(bundled.embed([texts[5]])[0], vectors[5], atol=1e-6)


# ONNX Runtime: the bundled model runs on it, with torch's vectors.

LONG = " ".join(["the meeting about the quarterly budget moved to thursday afternoon"] * 60)
ODD_TEXTS = [
    "peanut allergy",
    LONG,
    "我对花生过敏，但是很喜欢吃杏仁。",
    "",
    "  Mixed CASE, spaces!  ",
]


def _mixed_texts(n: int, tag: str = "") -> list[str]:
    words = ["project", "deadline", "allergy", "peanut", "Berlin", "budget", "会议", "花生"]
    texts = [tag + " ".join(words[(i * 7 + j) % 8] for j in range(i * 13 % 40)) for i in range(n)]
    return [*texts[:-5], *ODD_TEXTS]  # the odd ones last: far from their sorted position


def _min_cosine(a: np.ndarray, b: np.ndarray) -> float:
    assert a.shape == b.shape
    return float(np.min(np.sum(a * b, axis=1)))


@pytest.fixture(scope="module")
def bundled_torch() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder("bundled", backend="torch")


@pytest.mark.slow
def test_bundled_model_runs_on_onnxruntime(bundled: Embedder) -> None:
    assert isinstance(bundled, SentenceTransformerEmbedder)
    assert bundled.backend == "onnxruntime"
    assert isinstance(bundled.encoder, OnnxEncoder)  # torch runs only in the exporting child


@pytest.mark.slow
@pytest.mark.parametrize("start", ["cold", "warm"])
def test_the_proxy_process_never_imports_torch(bundled: Embedder, cache_dir: Path, tmp_path: Path, start: str) -> None:
    folder = tmp_path if start == "cold" else cache_dir  # ``bundled`` exported into cache_dir
    code = (
        "import sys; from pathlib import Path; from proxy.memory.search.embedder import load_embedder;"
        f"e = load_embedder('bundled', cache_dir=Path({str(folder)!r}));"
        "e.embed(['peanut allergy']); print(e.backend, 'torch' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["onnxruntime", "False"]


@pytest.mark.slow
def test_the_bundled_export_runs_fused_attention(bundled: Embedder, cache_dir: Path) -> None:
    import onnx

    (graph,) = (cache_dir / "onnx").glob("*/model.onnx")  # ``bundled`` exported into cache_dir
    ops = [n.op_type for n in onnx.load(str(graph)).graph.node]
    assert ops.count("Attention") == 6 and ops.count("SkipLayerNormalization") == 12  # one per layer, two
    assert len(ops) < 60  # the plain export has ~700 nodes, ~340 after ONNX Runtime's own rewrites


def test_a_failed_fusion_keeps_the_plain_graph(capsys: pytest.CaptureFixture[str]) -> None:
    class Config:
        num_attention_heads, hidden_size = 12, 384

    assert _fused(b"not a graph", Config()) == b"not a graph"
    assert "plain graph is kept" in capsys.readouterr().err


@pytest.mark.slow
def test_backend_torch_never_exports(bundled_torch: SentenceTransformerEmbedder) -> None:
    assert bundled_torch.backend == "torch"
    assert not isinstance(bundled_torch.encoder, OnnxEncoder)


@pytest.mark.slow
@pytest.mark.parametrize("text", ODD_TEXTS, ids=["short", "long", "chinese", "empty", "spaces"])
def test_onnxruntime_embeds_a_query_like_torch(
    bundled: Embedder, bundled_torch: SentenceTransformerEmbedder, text: str
) -> None:
    vectors = bundled.embed([text])
    _assert_unit_rows(vectors, 1, 384)
    assert _min_cosine(vectors, bundled_torch.embed([text])) >= 0.9999


@pytest.mark.slow
def test_onnxruntime_embeds_a_batch_like_torch_in_order(
    bundled: Embedder, bundled_torch: SentenceTransformerEmbedder
) -> None:
    texts = _mixed_texts(70)  # three batches of lengths from 0 to > max_seq_length tokens
    vectors = bundled.embed(texts)
    _assert_unit_rows(vectors, 70, 384)
    assert _min_cosine(vectors, bundled_torch.embed(texts)) >= 0.9999


@pytest.mark.slow
def test_onnxruntime_is_safe_across_threads(
    bundled: Embedder, bundled_torch: SentenceTransformerEmbedder
) -> None:
    # Texts no other test embeds, so that every call runs the sessions.
    calls = [[f"thread {i} {t}"] for i, t in enumerate(ODD_TEXTS)]
    calls += [_mixed_texts(12, f"batch {i} ")[:-5] for i in range(3)]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(bundled.embed, calls))
    for texts, vectors in zip(calls, results, strict=True):
        assert _min_cosine(vectors, bundled_torch.embed(texts)) >= 0.9999


@pytest.mark.slow
def test_only_the_supported_module_stack_is_exported(
    bundled_torch: SentenceTransformerEmbedder,
) -> None:
    model = bundled_torch.encoder.model
    transformer, pooling, normalize = list(model)
    assert onnx_unsupported(model) is None
    assert onnx_unsupported([transformer, pooling]) is None
    dim = bundled_torch.dim
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


@pytest.mark.slow
def test_a_failed_export_keeps_torch(caplog: pytest.LogCaptureFixture) -> None:
    failing = OnnxCache(None, command=exits(1, "RuntimeError: no exporter today"))
    with caplog.at_level(logging.WARNING, logger="paperclip.embedder"):
        embedder = SentenceTransformerEmbedder("bundled", onnx=failing)
    assert embedder.backend == "torch"
    assert [r.getMessage() for r in caplog.records if "no exporter today" in r.getMessage()]
    _assert_unit_rows(embedder.embed(["still works"]), 1, 384)


def test_bundled_path_is_a_local_folder() -> None:
    assert os.path.isfile(os.path.join(bundled_path(), "model.safetensors"))
