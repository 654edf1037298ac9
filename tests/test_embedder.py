"""Embedders: the hashing fake, the registry, and (slow) the bundled model."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from proxy.memory.embedder import (
    BUNDLED_NAME,
    Embedder,
    HashEmbedder,
    SentenceTransformerEmbedder,
    load_embedder,
)

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
    code = "from proxy.memory.embedder import HashEmbedder; print(HashEmbedder().embed(['peanut allergy 42']).tobytes().hex())"
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


@pytest.fixture(scope="module")
def bundled() -> Embedder:
    return load_embedder("bundled")


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
