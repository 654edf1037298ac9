"""``memory.rerank``: the best candidates re-read by a cross-encoder, in its order, off the event loop."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy import config
from proxy.errors import ConfigError
from proxy.memory.recall.recall import RecallRequest, recall_for
from proxy.memory.recall.rerank import CrossEncoderReranker, load_rerankers, reorder
from proxy.memory.search.embedder import HashEmbedder
from proxy.memory.search.fragment_index import FragmentIndex
from proxy.memory.search.fusion import Floor
from proxy.store import open_store
from proxy.tokens import TokenCounter
from tests.conftest import Proxy

TURNS = [
    "My bike is red and I ride it to work.",
    "The bike shop said the red paint is original.",
    "I keep the bike in the garage next to the lawnmower.",
    "Bike lanes in my city are painted green.",
]


@given(st.lists(st.integers(), max_size=30), st.data())
def test_reorder_sorts_the_head_by_score_and_keeps_the_tail(hits: list[int], data: st.DataObject) -> None:
    n = data.draw(st.integers(0, len(hits)))
    scores = data.draw(st.lists(st.floats(-10, 10), min_size=n, max_size=n))
    out = reorder(hits, scores)  # type: ignore[arg-type]  # reorder never looks inside a hit
    assert sorted(out) == sorted(hits) and out[n:] == hits[n:]
    head_scores = [scores[hits[:n].index(h)] for h in out[:n]] if len(set(hits[:n])) == n else None
    if head_scores is not None:
        assert head_scores == sorted(scores, reverse=True)


class Prefers:
    """A fake cross-encoder: ``target`` scores 1, every other text 0; it records what it read and where."""

    name = "prefers"

    def __init__(self, target: str) -> None:
        self.target = target
        self.threads: list[str] = []
        self.seen: list[tuple[str, int]] = []

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        self.threads.append(threading.current_thread().name)
        self.seen.append((query, len(texts)))
        return [float(t == self.target) for t in texts]


async def test_recall_puts_the_rerankers_choice_first_within_top_n(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "r.db"), 64)
    try:
        index = FragmentIndex(store.fragments, HashEmbedder(64), TokenCounter(None))
        await index.index("t", "ana", "s", [(i, "user", t) for i, t in enumerate(TURNS)], "keep", created=0.0)
        memory = config.from_dict({}, env={}).defaults.memory
        ask = RecallRequest("t", "ana", "q", [{"role": "user", "content": "Tell me about my bike"}], [], memory, 0.0)
        plain = await recall_for(index, ask, TokenCounter(None), Floor(0, 0))
        last = plain.hits[-1].fragment
        assert last is not None and len(plain.hits) == len(TURNS)
        fake = Prefers(last.text)  # the plain ranking's last
        reranked = await recall_for(index, ask, TokenCounter(None), Floor(0, 0), reranker=fake)
        assert reranked.hits[0].fragment == last
        assert [h.id for h in reranked.hits[1:]] == [h.id for h in plain.hits[:-1]]  # ties keep their order
        assert fake.seen == [("Tell me about my bike", len(TURNS))]  # the query, the top N at most
        assert fake.threads and fake.threads[0] != threading.main_thread().name  # off the event loop
        fewer = dataclasses.replace(ask, settings=memory.model_copy(update={"rerank_top_n": 2}))
        capped = await recall_for(index, fewer, TokenCounter(None), Floor(0, 0), reranker=fake)
        assert fake.seen[-1][1] == 2 and [h.id for h in capped.hits] == [h.id for h in plain.hits]
    finally:
        store.close()


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cross-encoder of BERT's shape with random weights, made here: the loading code, nothing downloaded."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    folder = tmp_path_factory.mktemp("tiny-cross-encoder")
    words = sorted({w.strip(".,").lower() for t in TURNS for w in t.split()} | {"tell", "me", "about"})
    (folder / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n")
    BertTokenizerFast(str(folder / "vocab.txt")).save_pretrained(folder)
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=len(words) + 5, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, num_labels=1)
    BertForSequenceClassification(cfg).save_pretrained(folder)
    return folder


def test_a_cross_encoder_loads_from_a_folder_and_scores_each_pair(tiny_cross_encoder: Path) -> None:
    loaded = load_rerankers([None, str(tiny_cross_encoder), str(tiny_cross_encoder)])
    assert list(loaded) == [str(tiny_cross_encoder)]  # one model per distinct name
    reranker = loaded[str(tiny_cross_encoder)]
    assert isinstance(reranker, CrossEncoderReranker)
    scores = reranker.score("tell me about my bike", TURNS)
    assert len(scores) == len(TURNS) and all(isinstance(s, float) for s in scores)
    assert reranker.score("tell me about my bike", TURNS) == scores  # deterministic
    assert len(set(scores)) > 1 and reranker.score("q", []) == []


def test_the_config_keys_are_checked() -> None:
    memory = config.from_dict({"defaults": {"memory": {"rerank": "/models/x", "rerank_top_n": 50}}}, env={})
    assert (memory.defaults.memory.rerank, memory.defaults.memory.rerank_top_n) == ("/models/x", 50)
    assert config.from_dict({}, env={}).defaults.memory.rerank is None
    with pytest.raises(ConfigError, match="rerank_top_n"):
        config.from_dict({"defaults": {"memory": {"rerank_top_n": 0}}}, env={})


def test_the_proxy_loads_the_configured_cross_encoder_at_start_and_serves_with_it(
    make_proxy: Callable[..., Proxy], tiny_cross_encoder: Path
) -> None:
    proxy = make_proxy(defaults={"memory": {"rerank": str(tiny_cross_encoder), "profile": False}})
    layer = proxy.runtime.memory.layer
    pipeline = layer.pipeline if layer is not None else None
    assert pipeline is not None and list(pipeline.rerankers) == [str(tiny_cross_encoder)]
    history: list[dict[str, Any]] = [{"role": "user", "content": TURNS[2]}]
    with proxy.client() as client:
        client.chat.completions.create(model="gpt-4o-mini", messages=history)  # type: ignore[arg-type]
        proxy.drain()
        raw = client.chat.completions.with_raw_response.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "Where do I keep the bike?"}]
        )
    assert raw.headers["x-paperclip-memories"] == "1" and "x-paperclip-degraded" not in raw.headers
