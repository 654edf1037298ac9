"""Retrieval end to end: the real proxy on loopback in front of the fake upstream (hash embedder)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import psycopg
import pytest

from proxy import config
from proxy.memory.recall.cards import BLOCK_END, BLOCK_START
from proxy.memory.search.embedder import HashEmbedder, Vectors
from proxy.server.app import create_app
from proxy.store import urls
from proxy.tokens import TokenCounter
from tests.conftest import ADMIN_KEY, Proxy, base_config, both_stores
from tests.fake_upstream import FakeUpstream
from tests.servers import ServerThread

backend = both_stores  # every test that starts a proxy runs on SQLite and on PostgreSQL

FACT = "My cat Biscuit is allergic to peanuts, remember that."
QUESTION = "Which food is my cat Biscuit allergic to?"
UNRELATED = "Can you explain how photosynthesis works in green plants?"
GLOBEX_KEY = "pk-test-globex"


def send(
    proxy: Proxy, messages: list[dict[str, Any]], user: str = "ana", key: str | None = None, **headers: str
) -> dict[str, str]:
    with proxy.client(key) if key else proxy.client() as client:
        raw = client.chat.completions.with_raw_response.create(
            model="gpt-4o-mini",
            messages=messages,  # type: ignore[arg-type]
            extra_headers={"X-Paperclip-User": user, **headers},
        )
    proxy.drain()
    return dict(raw.headers)


def forwarded(upstream: FakeUpstream) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = upstream.chat_requests()[-1].json()["messages"]
    return messages


def block_of(messages: Sequence[dict[str, Any]]) -> str:
    """The memory block as forwarded (its own text, not a repr of it: its tokens are what the budget bounds)."""
    for m in messages:
        content = m.get("content")
        parts = [content] if isinstance(content, str) else [p.get("text", "") for p in content or []
                                                             if isinstance(p, dict)]
        for text in parts:
            start = text.find(BLOCK_START)
            if start >= 0:
                return str(text[start : text.find(BLOCK_END) + len(BLOCK_END)])
    return ""


def long_history(fact: str, filler: Callable[[int], tuple[str, str]], pairs: int = 150) -> list[dict[str, Any]]:
    """A fact, then ``pairs`` filler exchanges: the fact ends up ``2 * pairs`` turns back."""
    history: list[dict[str, Any]] = [
        {"role": "user", "content": fact},
        {"role": "assistant", "content": "Noted, I will keep that in mind."},
    ]
    for i in range(pairs):
        user, assistant = filler(i)
        history += [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
    return history


def english(i: int) -> tuple[str, str]:
    return f"Let us talk about topic number {i} of the weather and trains.", f"Sure, topic {i}: trains run on rails."


def chinese(i: int) -> tuple[str, str]:
    return f"我们聊聊第{i}个话题：天气和火车。", f"好的，第{i}个话题：火车在铁轨上行驶。"


def trace(proxy: Proxy, trace_id: str) -> dict[str, Any]:
    with proxy.http(ADMIN_KEY) as http:
        got = http.get(f"/paperclip/v1/traces/{trace_id}")
    assert got.status_code == 200, got.text
    data: dict[str, Any] = got.json()
    return data


def test_a_fact_said_300_turns_ago_is_recalled(proxy: Proxy, upstream: FakeUpstream) -> None:
    history = long_history(FACT, english)
    send(proxy, [*history, {"role": "user", "content": "Thanks."}])  # indexed after the response
    headers = send(proxy, [*history, {"role": "user", "content": QUESTION}])
    assert int(headers["x-paperclip-memories"]) >= 1
    block = block_of(forwarded(upstream))
    assert FACT in block
    # The fact leads the block, from the profile and as a turn; the filler said the same day
    # shares the fact's card (one header per day), so the cards stay few.
    assert block.index(FACT) < block.index("topic number")
    assert int(headers["x-paperclip-memories"]) <= 1 + 8


def test_a_chinese_question_finds_chinese_text_by_keywords(proxy: Proxy, upstream: FakeUpstream) -> None:
    history = long_history("我的猫咪小花对花生严重过敏，请记住。", chinese)
    send(proxy, [*history, {"role": "user", "content": "谢谢。"}])
    headers = send(proxy, [*history, {"role": "user", "content": "我的猫对什么过敏？"}])
    assert "花生" in block_of(forwarded(upstream))
    found = trace(proxy, headers["x-paperclip-trace"])["candidates"]
    fact = [c for c in found if c["kind"] == "fragment" and "花生" in c["text"]]
    assert fact and fact[0]["bm25"] > 0, found[:3]


def test_an_unrelated_question_injects_nothing_but_the_profile(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    for profile in (True, False):
        proxy = make_proxy(defaults={"memory": {"profile": profile}})
        history = long_history(FACT, english, pairs=20)
        send(proxy, [*history, {"role": "user", "content": "Thanks."}])
        question = [{"role": "user", "content": UNRELATED}]
        headers = send(proxy, question)
        if not profile:
            assert headers["x-paperclip-memories"] == "0"
            assert forwarded(upstream) == question
            continue
        block = block_of(forwarded(upstream))
        assert "allergic to peanuts" in block  # a standing fact, whatever the question
        assert "earlier turn" not in block and "topic number" not in block


def test_recalled_in_another_session_of_the_same_user(proxy: Proxy, upstream: FakeUpstream) -> None:
    first = send(proxy, long_history(FACT, english, pairs=3))
    second = send(proxy, [{"role": "user", "content": QUESTION}])
    assert first["x-paperclip-session"] != second["x-paperclip-session"]
    assert FACT in block_of(forwarded(upstream))


def test_never_across_users_or_tenants(make_proxy: Callable[..., Proxy], upstream: FakeUpstream) -> None:
    proxy = make_proxy(tenants={"globex": {"api_keys": [GLOBEX_KEY]}})
    send(proxy, long_history(FACT, english, pairs=3), user="ana")
    question = [{"role": "user", "content": QUESTION}]
    assert send(proxy, question, user="bob")["x-paperclip-memories"] == "0"
    assert forwarded(upstream) == question
    # Same user name, other tenant: nothing either.
    assert send(proxy, question, user="ana", key=GLOBEX_KEY)["x-paperclip-memories"] == "0"
    assert forwarded(upstream) == question
    assert send(proxy, question, user="ana")["x-paperclip-memories"] != "0"


def test_budget_and_top_k_hold_with_long_fragments(make_proxy: Callable[..., Proxy], upstream: FakeUpstream) -> None:
    proxy = make_proxy(defaults={"memory": {"budget_tokens": 200, "top_k": 2}})
    history: list[dict[str, Any]] = []
    for i in range(6):
        body = " ".join(f"invoice {i} line {j} costs {i * j} euros" for j in range(40))
        history += [{"role": "user", "content": body}, {"role": "assistant", "content": f"Invoice {i} noted."}]
    send(proxy, [*history, {"role": "user", "content": "ok"}])
    headers = send(proxy, [{"role": "user", "content": "What did the invoice lines cost in euros?"}])
    block = block_of(forwarded(upstream))
    assert 1 <= int(headers["x-paperclip-memories"]) <= 2
    assert 0 < TokenCounter(None).text(block) <= 200


# Standing guesses (what the reader of Chinese statements keeps, with any embedding model), then a chat whose
# turns a question matches: the profile's guesses stay only in the room the hits leave.
GUESSES = ["我每周三晚上都去游泳馆游一个小时。", "我们一家人都不吃牛肉，已经很多年了。", "我在一家医院做药剂师，经常上夜班。",
           "我老家在云南大理，现在也住那边。", "我平时只喝无糖的豆浆，不喝牛奶。", "我每天早上骑自行车上班，大概二十分钟。"]


def test_the_budget_holds_the_block_whole_with_guesses_beside_the_hits(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    proxy = make_proxy(defaults={"memory": {"budget_tokens": 260, "extract_every_messages": 2}})
    for n, said in enumerate(GUESSES):
        chat = [{"role": "user", "content": said}, {"role": "assistant", "content": "好的。"},
                {"role": "user", "content": "谢谢。"}]
        send(proxy, chat, **{"X-Paperclip-Session": f"said-{n}"})
    history: list[dict[str, Any]] = []
    for i in range(8):
        history += [{"role": "user", "content": f"发票 {i} 的金额是 {i * 37} 元，发票 {i} 要在月底前报销。"},
                    {"role": "assistant", "content": f"发票 {i} 记下了。"}]
    send(proxy, [*history, {"role": "user", "content": "好"}], **{"X-Paperclip-Session": "invoices"})
    for n, question in enumerate(["发票的金额是多少元？", "哪些发票要在月底前报销？", "发票 3 的金额？"]):
        send(proxy, [{"role": "user", "content": question}], **{"X-Paperclip-Session": f"asked-{n}"})
        block = block_of(forwarded(upstream))
        assert "发票" in block and any(g in block for g in GUESSES)  # hits and guesses both
        assert TokenCounter(None).text(block) <= 260


def test_array_content_gets_the_block_as_a_text_part(proxy: Proxy, upstream: FakeUpstream) -> None:
    send(proxy, long_history(FACT, english, pairs=3))
    part = {"type": "text", "text": QUESTION}
    send(proxy, [{"role": "user", "content": [part]}])
    content = forwarded(upstream)[-1]["content"]
    assert content[0]["type"] == "text" and FACT in content[0]["text"]
    assert content[1:] == [part]


def test_memory_off_injects_and_records_nothing(proxy: Proxy, upstream: FakeUpstream) -> None:
    send(proxy, long_history(FACT, english, pairs=3))
    secret = [{"role": "user", "content": "My locker code is 4711, do not forget it."}]
    question = [{"role": "user", "content": QUESTION}]
    assert send(proxy, question, **{"X-Paperclip-Memory": "off"})["x-paperclip-memories"] == "0"
    assert forwarded(upstream) == question
    before = proxy.server.call(proxy.store.fragments.count("acme", "ana"))
    send(proxy, secret, **{"X-Paperclip-Memory": "off"})
    assert proxy.server.call(proxy.store.fragments.count("acme", "ana")) == before


@pytest.mark.parametrize("position", ["system_tail", "system_head"])
def test_memory_positions(make_proxy: Callable[..., Proxy], upstream: FakeUpstream, position: str) -> None:
    proxy = make_proxy(defaults={"memory": {"position": position}})
    send(proxy, long_history(FACT, english, pairs=3))
    lead = {"role": "system", "content": "You are helpful."}
    question = {"role": "user", "content": QUESTION}
    send(proxy, [lead, question])
    sent = forwarded(upstream)
    assert sent[0] == lead and sent[-1] == question
    assert len(sent) == 3 and sent[1]["role"] == "system" and FACT in sent[1]["content"]


class FlakyEmbedder(HashEmbedder):
    """A real (hashing) embedder that can be made to fail, like a model whose worker died."""

    def __init__(self) -> None:
        super().__init__()
        self.broken = False

    def embed(self, texts: Sequence[str]) -> Vectors:
        if self.broken:
            raise RuntimeError("embedding worker died")
        return super().embed(texts)


@pytest.fixture
def flaky_proxy(upstream_url: str, tmp_path: Path) -> Iterator[tuple[Proxy, FlakyEmbedder]]:
    embedder = FlakyEmbedder()
    settings = config.from_dict(base_config(upstream_url, tmp_path / "p.db"), env={})
    app = create_app(settings, embedder=embedder)
    server = ServerThread(app, server_header=False, date_header=False).start()
    proxy = Proxy(server, app)
    proxy.wait_ready()
    yield proxy, embedder
    proxy.stop()


def test_embedder_failure_falls_back_to_plain_forwarding(
    flaky_proxy: tuple[Proxy, FlakyEmbedder], upstream: FakeUpstream
) -> None:
    proxy, embedder = flaky_proxy
    send(proxy, long_history(FACT, english, pairs=3))
    embedder.broken = True
    question = [{"role": "user", "content": QUESTION}]
    headers = send(proxy, question)
    assert headers["x-paperclip-degraded"] == "RuntimeError"
    assert forwarded(upstream) == question
    embedder.broken = False
    assert "x-paperclip-degraded" not in send(proxy, question)
    assert FACT in block_of(forwarded(upstream))


def test_store_failure_falls_back_to_plain_forwarding(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream, storage_url: str
) -> None:
    proxy = make_proxy()
    send(proxy, long_history(FACT, english, pairs=3))
    # The table goes away under the running proxy.
    rename = "ALTER TABLE fragments RENAME TO fragments_gone"
    if urls.is_sqlite(storage_url):
        with sqlite3.connect(urls.sqlite_path(storage_url)) as db:
            db.execute(rename)
    else:
        with psycopg.connect(storage_url, autocommit=True) as pg:
            pg.execute(rename)
    question = [{"role": "user", "content": QUESTION}]
    headers = send(proxy, question)
    assert headers["x-paperclip-degraded"]
    assert forwarded(upstream) == question


@pytest.mark.parametrize("backend", ["sqlite"])  # the model's test: one store is enough
def test_with_the_bundled_model(make_proxy: Callable[..., Proxy], upstream: FakeUpstream) -> None:
    """The real model: a paraphrase is found without a shared keyword; an unrelated question gets nothing."""
    proxy = make_proxy(embedding={"model": "bundled"})
    fact = "I'm training hard for the Berlin marathon this September."
    send(proxy, long_history(fact, english, pairs=20))
    send(proxy, [{"role": "user", "content": "Which race am I getting ready for?"}])
    assert fact in block_of(forwarded(upstream))
    unrelated = [{"role": "user", "content": "What is the capital of France?"}]
    assert send(proxy, unrelated)["x-paperclip-memories"] == "0"


def test_with_the_bundled_model_in_chinese(make_proxy: Callable[..., Proxy], upstream: FakeUpstream) -> None:
    """The English model's cosines between Chinese sentences are no evidence: a shared term is."""
    proxy = make_proxy(embedding={"model": "bundled"}, defaults={"memory": {"profile": False}})
    fact = "我下个月要去柏林跑马拉松。"
    send(proxy, long_history(fact, chinese, pairs=20))
    unrelated = [{"role": "user", "content": "天空为什么是蓝色的？"}]
    assert send(proxy, unrelated)["x-paperclip-memories"] == "0"
    assert forwarded(upstream) == unrelated
    send(proxy, [{"role": "user", "content": "马拉松之前我该怎么训练？"}])
    assert fact in block_of(forwarded(upstream))
