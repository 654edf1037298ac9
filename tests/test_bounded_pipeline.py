"""The memory pipeline on the server's loop: prepares and records bounded, the loop free for sockets."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import httpx
import pytest

from proxy import config
from proxy.errors import MemoryBusy
from proxy.memory.recall.query import fragment_hash
from proxy.pipeline.bounded_pipeline import BoundedPipeline
from proxy.pipeline.chat_call import ChatCall, Reply
from proxy.pipeline.pipeline_protocol import Prepared
from proxy.tenancy import Tenant
from tests.conftest import Proxy, both_stores

backend = both_stores  # every test that starts a proxy runs on SQLite and on PostgreSQL


class Gate:
    """A fake inner pipeline: counts what runs at once, and holds prepares and records until opened."""

    def __init__(self) -> None:
        self.running = {"prepare": 0, "record": 0}
        self.most = {"prepare": 0, "record": 0}
        self.recorded = 0
        self.prepared = 0
        self.records = asyncio.Event()
        self.prepares = asyncio.Event()
        self.prepares.set()
        self.in_prepare = threading.Event()  # read from the test's own thread in the proxy tests
        self.changed = asyncio.Condition()

    async def wait_running(self, kind: str, n: int) -> None:
        async with asyncio.timeout(30), self.changed:
            await self.changed.wait_for(lambda: self.running[kind] >= n)

    async def _held(self, kind: str, gate: asyncio.Event) -> None:
        self.running[kind] += 1
        self.most[kind] = max(self.most[kind], self.running[kind])
        async with self.changed:
            self.changed.notify_all()
        try:
            await gate.wait()
        finally:
            self.running[kind] -= 1

    async def prepare(self, call: ChatCall) -> Prepared:
        self.in_prepare.set()
        await self._held("prepare", self.prepares)
        self.prepared += 1
        return Prepared(messages=None, tokens_in=1, tokens_forwarded=1)

    async def record(self, call: ChatCall, prepared: Prepared, reply: Reply) -> None:
        await self._held("record", self.records)
        self.recorded += 1


def a_call(trace: str = "t-1") -> ChatCall:
    settings = config.from_dict({}, env={})
    tenant = Tenant("t", settings.defaults, None, passthrough=True)
    return ChatCall(tenant, "u", "s", trace, {}, [], None, {})


async def test_at_most_n_prepares_run_at_once_the_rest_wait_in_turn() -> None:
    inner = Gate()
    inner.prepares.clear()
    pipeline = BoundedPipeline(inner, prepares=2)
    prepares = [asyncio.ensure_future(pipeline.prepare(a_call(f"t-{i}"))) for i in range(5)]
    await inner.wait_running("prepare", 2)
    await asyncio.sleep(0.1)  # room for a third to start, were it allowed to
    assert inner.running["prepare"] == 2 and not any(p.done() for p in prepares)
    inner.prepares.set()
    assert [p.tokens_in for p in await asyncio.gather(*prepares)] == [1] * 5
    assert inner.most["prepare"] == 2


async def test_at_most_n_records_run_at_once_the_rest_wait_and_all_complete() -> None:
    inner = Gate()
    pipeline = BoundedPipeline(inner, records=2, waiting=10)
    prepared = Prepared(None, 1, 1)
    records = [asyncio.ensure_future(pipeline.record(a_call(f"t-{i}"), prepared, Reply(200))) for i in range(5)]
    await inner.wait_running("record", 2)
    await asyncio.sleep(0.1)
    assert inner.running["record"] == 2 and pipeline.backlog == 5
    inner.records.set()
    await asyncio.gather(*records)
    assert inner.recorded == 5 and inner.most["record"] == 2 and pipeline.backlog == 0


async def test_a_full_record_queue_holds_new_requests_until_a_record_finishes() -> None:
    inner = Gate()
    pipeline = BoundedPipeline(inner, records=1, waiting=1)
    prepared = Prepared(None, 1, 1)
    held = [asyncio.ensure_future(pipeline.record(a_call(f"t-{i}"), prepared, Reply(200))) for i in range(2)]
    await inner.wait_running("record", 1)
    waiting = asyncio.ensure_future(pipeline.prepare(a_call("t-next")))
    await asyncio.sleep(0.2)  # room for it to be prepared, were it let through
    assert not waiting.done() and inner.prepared == 0
    inner.records.set()
    await asyncio.gather(*held)
    assert (await waiting).tokens_in == 1 and inner.recorded == 2


async def test_a_request_that_finds_no_room_in_time_goes_out_without_memory() -> None:
    inner = Gate()
    pipeline = BoundedPipeline(inner, records=1, waiting=0, room_wait_s=0.05)
    held = asyncio.ensure_future(pipeline.record(a_call(), Prepared(None, 1, 1), Reply(200)))
    await inner.wait_running("record", 1)
    with pytest.raises(MemoryBusy) as busy:
        await pipeline.prepare(a_call("t-late"))
    assert busy.value.reason == "memory_busy"
    inner.records.set()
    await held
    assert (await pipeline.prepare(a_call("t-after"))).tokens_in == 1  # room again


def test_healthz_answers_while_every_prepare_slot_is_taken(make_proxy: Callable[..., Proxy]) -> None:
    inner = Gate()
    proxy = make_proxy(pipeline=BoundedPipeline(inner, prepares=1))
    proxy.server.call(_close(inner.prepares))
    chats = [threading.Thread(target=lambda: proxy.client().chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "hello"}])) for _ in range(3)]
    try:
        for chat in chats:
            chat.start()
        assert inner.in_prepare.wait(30)
        with httpx.Client(base_url=proxy.url, timeout=10) as http:
            # One request holds the only slot, two wait for it; the loop still answers.
            assert http.get("/healthz").json() == {"status": "ok"}
        assert inner.prepared == 0
    finally:
        proxy.server.call(_open(inner.prepares))
        inner.records.set()
        for chat in chats:
            chat.join(30)
    proxy.drain()
    assert inner.prepared == 3 and inner.most["prepare"] == 1


async def _close(gate: asyncio.Event) -> None:
    gate.clear()


async def _open(gate: asyncio.Event) -> None:
    gate.set()


def test_the_memory_layer_is_served_bounded_on_the_servers_loop_over_either_store(proxy: Proxy) -> None:
    served = proxy.runtime.memory.pipeline
    memory = proxy.runtime.memory.layer
    assert isinstance(served, BoundedPipeline)
    assert memory is not None and served.inner is memory.pipeline
    assert not [t for t in threading.enumerate() if "pipeline" in t.name]  # no loop of its own
    said = "My cat is allergic to peanuts, remember that."
    proxy.client().chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": said}], user="cat-owner"
    )
    proxy.drain()
    assert served.backlog == 0
    known = proxy.server.call(proxy.store.fragments.known("acme", "cat-owner", [fragment_hash("user", said)]))
    assert known == {fragment_hash("user", said)}
