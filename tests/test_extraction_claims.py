"""Each turn is extracted once, however many records of its session run at once, in one process or several."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from proxy.memory.extraction.extractor import Extractor, Turn
from proxy.memory.search.embedder import HashEmbedder
from proxy.metrics import Metrics
from proxy.prompts import Prompts
from proxy.store import Store, open_store
from proxy.store.records import cursor_key
from tests.conftest import Proxy
from tests.fake_upstream import FakeUpstream, completion
from tests.test_structured_memories import fast, forwarded_last_user, items

EMBEDDER = HashEmbedder(16)
CAROL = {"type": "entity", "content": "The user's name is Carol.", "key": "user.name", "importance": 0.8,
         "confidence": 0.9, "source": "user-stated", "expires_at": None, "turns": [1]}
TURNS: list[Turn] = [(0, "user", "Hi, my name is Carol."), (1, "assistant", "Hello Carol!"),
                     (2, "user", "I drink green tea every morning."), (3, "assistant", "Nice.")]


async def embed(texts: Sequence[str]) -> np.ndarray:
    return EMBEDDER.embed(list(texts))


class Model:
    """The extraction model: slow enough that concurrent records overlap, counting its calls."""

    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, messages: list[dict[str, Any]], response_format: dict[str, Any] | None = None) -> str:
        self.calls += 1
        await asyncio.sleep(0.05)
        return json.dumps([CAROL])


def extractor(store: Store) -> Extractor:
    return Extractor(store.items, store.cursors, Prompts.load(), embed, Metrics())


KEY = cursor_key("u", "s")  # user u's session s


async def catch_up(ex: Extractor, model: Model) -> int:
    return await ex.catch_up("t", "u", "s", TURNS, len(TURNS), model, every=4, pii="keep", dedup_cosine=0.9)


async def test_concurrent_records_of_one_session_extract_each_turn_once(tmp_path: Path) -> None:
    store, model = open_store(str(tmp_path / "c.db"), 16), Model()
    try:
        added = await asyncio.gather(*(catch_up(extractor(store), model) for _ in range(6)))
        assert model.calls == 1 and sorted(added) == [0] * 5 + [1]
        assert await store.cursors.cursor("t", KEY) == len(TURNS)
        assert await catch_up(extractor(store), model) == 0 and model.calls == 1  # nothing new: no call
    finally:
        store.close()


async def test_two_processes_on_one_database_extract_each_turn_once(tmp_path: Path) -> None:
    # Two stores on one file: two writer connections, as two worker processes have.
    one, two, model = open_store(str(tmp_path / "p.db"), 16), open_store(str(tmp_path / "p.db"), 16), Model()
    try:
        await asyncio.gather(*(catch_up(extractor(s), model) for s in (one, two, one, two)))
        assert model.calls == 1
        assert [r.content for r in await two.items.all("t", "u")] == [CAROL["content"]]
    finally:
        one.close()
        two.close()


async def test_a_failed_extraction_leaves_its_turns_to_the_next_record(tmp_path: Path) -> None:
    store, model = open_store(str(tmp_path / "f.db"), 16), Model()

    async def broken(texts: Sequence[str]) -> np.ndarray:
        raise RuntimeError("embedding failed")

    try:
        failing = Extractor(store.items, store.cursors, Prompts.load(), broken, Metrics())
        with pytest.raises(RuntimeError):
            await catch_up(failing, model)
        assert await store.cursors.cursor("t", KEY) == 0
        assert await catch_up(extractor(store), model) == 1
    finally:
        store.close()


async def test_the_claim_of_a_dead_process_is_taken_over_once_its_lease_ends(tmp_path: Path) -> None:
    store, model = open_store(str(tmp_path / "d.db"), 16), Model()
    try:
        assert await store.cursors.claim("t", KEY, 0, "alive", lease_s=60)
        assert await catch_up(extractor(store), model) == 0  # held by a live claim
        assert await store.cursors.claim("t", KEY, 0, "dead", lease_s=-1) is False  # cannot steal a live one
        await store.cursors.release("t", KEY, "alive")
        assert await store.cursors.claim("t", KEY, 0, "dead", lease_s=-1)  # taken, then its process died
        assert await catch_up(extractor(store), model) == 1 and model.calls == 1
    finally:
        store.close()


def test_twenty_identical_requests_at_once_extract_once_and_inject_one_card(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    calls = []

    async def model(request: Request, body: dict[str, Any]) -> Response:
        if "long-term memories" not in str(body["messages"][-1]["content"]):
            return JSONResponse(completion("Turns 1–2: short."))
        calls.append(body)
        await asyncio.sleep(0.2)
        return JSONResponse(completion(json.dumps([CAROL])))

    upstream.compression = model
    proxy = fast(make_proxy)
    history = [{"role": "user", "content": "Hi, my name is Carol."}, {"role": "assistant", "content": "Hello!"},
               {"role": "user", "content": "I drink green tea every morning."}, {"role": "assistant", "content": "Ok."},
               {"role": "user", "content": "What goes well with tea?"}]

    async def send(n: int) -> None:
        async with proxy.aclient() as client:
            await asyncio.gather(*(
                client.chat.completions.create(
                    model="gpt-4o-mini", messages=history, extra_headers={"X-Paperclip-User": "carol"}  # type: ignore[arg-type]
                )
                for _ in range(n)
            ))

    asyncio.run(send(20))
    proxy.drain()
    assert len(calls) == 1
    assert [i["content"] for i in items(proxy, "carol")] == [CAROL["content"]]
    with proxy.client() as client:
        client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "What is my name?"}],
            extra_headers={"X-Paperclip-User": "carol"},
        )
    proxy.drain()
    sent = forwarded_last_user(upstream)
    assert sent.count(CAROL["content"]) == 1
    assert sent.count("my name is Carol") <= 1
