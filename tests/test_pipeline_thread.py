"""The memory pipeline on a thread of its own: prepare and record off the server's loop, records bounded."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from proxy import config
from proxy.errors import MemoryBusy
from proxy.memory.recall.query import fragment_hash
from proxy.pipeline.chat_call import ChatCall, Reply
from proxy.pipeline.pipeline_protocol import Prepared
from proxy.pipeline.pipeline_thread import PipelineThread, ThreadedPipeline, home_calls
from proxy.tenancy import Tenant
from tests.conftest import Proxy


class Gate:
    """A fake inner pipeline: notes the thread of each call, and holds records until ``open``."""

    def __init__(self) -> None:
        self.threads: list[int] = []
        self.running = 0
        self.most = 0
        self.recorded = 0
        self.changed = threading.Condition()
        self.gate = threading.Event()
        self.prepare_gate = threading.Event()
        self.prepare_gate.set()
        self.in_prepare = threading.Event()

    async def prepare(self, call: ChatCall) -> Prepared:
        self.threads.append(threading.get_ident())
        self.in_prepare.set()
        self.prepare_gate.wait(30)  # holds its thread, as CPU work would
        return Prepared(messages=None, tokens_in=1, tokens_forwarded=1)

    async def record(self, call: ChatCall, prepared: Prepared, reply: Reply) -> None:
        self.threads.append(threading.get_ident())
        with self.changed:
            self.running += 1
            self.most = max(self.most, self.running)
            self.changed.notify_all()
        await asyncio.to_thread(self.gate.wait, 30)  # the pipeline's loop stays free for the other records
        with self.changed:
            self.running -= 1
            self.recorded += 1

    def wait_running(self, n: int) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: self.running >= n, 30)


@pytest.fixture
def thread() -> Iterator[PipelineThread]:
    t = PipelineThread()
    yield t
    t.close()


def a_call(trace: str = "t-1") -> ChatCall:
    settings = config.from_dict({}, env={})
    tenant = Tenant("t", settings.defaults, None, passthrough=True)
    return ChatCall(tenant, "u", "s", trace, {}, [], None, {})


async def test_prepare_and_record_run_on_the_pipeline_thread_not_the_callers(thread: PipelineThread) -> None:
    inner = Gate()
    inner.gate.set()
    pipeline = ThreadedPipeline(inner, thread)
    prepared = await pipeline.prepare(a_call())
    await pipeline.record(a_call(), prepared, Reply(200))
    assert inner.threads == [thread.ident, thread.ident]
    assert threading.get_ident() != thread.ident


async def test_at_most_n_records_run_at_once_the_rest_wait_and_all_complete(thread: PipelineThread) -> None:
    inner = Gate()
    pipeline = ThreadedPipeline(inner, thread, at_once=2, waiting=10)
    prepared = Prepared(None, 1, 1)
    records = [asyncio.ensure_future(pipeline.record(a_call(f"t-{i}"), prepared, Reply(200))) for i in range(5)]
    await asyncio.to_thread(inner.wait_running, 2)
    await asyncio.sleep(0.1)  # room for a third to start, were it allowed to
    assert inner.running == 2 and pipeline.backlog == 5
    inner.gate.set()
    await asyncio.gather(*records)
    assert inner.recorded == 5 and inner.most == 2 and pipeline.backlog == 0


async def test_a_full_record_queue_holds_new_requests_until_a_record_finishes(thread: PipelineThread) -> None:
    inner = Gate()
    pipeline = ThreadedPipeline(inner, thread, at_once=1, waiting=1)
    prepared = Prepared(None, 1, 1)
    held = [asyncio.ensure_future(pipeline.record(a_call(f"t-{i}"), prepared, Reply(200))) for i in range(2)]
    await asyncio.to_thread(inner.wait_running, 1)
    waiting = asyncio.ensure_future(pipeline.prepare(a_call("t-next")))
    await asyncio.sleep(0.2)  # room for it to be prepared, were it let through
    assert not waiting.done() and inner.threads.count(thread.ident) == 1  # only the running record
    inner.gate.set()
    await asyncio.gather(*held)
    assert (await waiting).tokens_in == 1 and inner.recorded == 2


async def test_a_request_that_finds_no_room_in_time_goes_out_without_memory(thread: PipelineThread) -> None:
    inner = Gate()
    pipeline = ThreadedPipeline(inner, thread, at_once=1, waiting=0, room_wait_s=0.05)
    held = asyncio.ensure_future(pipeline.record(a_call(), Prepared(None, 1, 1), Reply(200)))
    await asyncio.to_thread(inner.wait_running, 1)
    with pytest.raises(MemoryBusy) as busy:
        await pipeline.prepare(a_call("t-late"))
    assert busy.value.reason == "memory_busy"
    inner.gate.set()
    await held
    assert (await pipeline.prepare(a_call("t-after"))).tokens_in == 1  # room again


async def test_the_compression_models_calls_go_home_to_the_loop_of_its_clients(thread: PipelineThread) -> None:
    home = asyncio.get_running_loop()
    seen: list[asyncio.AbstractEventLoop] = []

    def complete_for(st: Any, key: str | None) -> Callable[..., Any]:
        async def complete(messages: list[dict[str, Any]], response_format: dict[str, Any] | None = None) -> str:
            seen.append(asyncio.get_running_loop())
            return "summary"

        return complete

    bridged = home_calls(complete_for, home)
    assert await thread.run(bridged(None, None)([{"role": "user", "content": "hi"}])) == "summary"
    assert await bridged(None, None)([]) == "summary"
    assert seen == [home, home]


def test_healthz_answers_while_a_prepare_holds_the_pipeline_thread(make_proxy: Callable[..., Proxy]) -> None:
    thread = PipelineThread()
    inner = Gate()
    inner.prepare_gate.clear()
    inner.gate.set()
    proxy = make_proxy(pipeline=ThreadedPipeline(inner, thread))
    try:
        with httpx.Client(base_url=proxy.url, timeout=30) as http:
            pending = threading.Thread(target=lambda: proxy.client().chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": "hello"}]))
            pending.start()
            assert inner.in_prepare.wait(30)
            # The request is held inside prepare; the server's loop still answers.
            assert http.get("/healthz", timeout=10).json() == {"status": "ok"}
            inner.prepare_gate.set()
            pending.join(30)
        proxy.drain()
        assert inner.threads == [thread.ident, thread.ident]  # prepare, then record
    finally:
        inner.prepare_gate.set()
        thread.close()


def test_a_sqlite_memory_layer_is_served_from_its_own_thread(proxy: Proxy) -> None:
    served = proxy.runtime.memory.pipeline
    assert isinstance(served, ThreadedPipeline)
    memory = proxy.runtime.memory.layer
    assert memory is not None and served.inner is memory.pipeline
    said = "My cat is allergic to peanuts, remember that."
    proxy.client().chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": said}], user="cat-owner"
    )
    proxy.drain()
    assert served.backlog == 0
    known = proxy.server.call(proxy.store.fragments.known("acme", "cat-owner", [fragment_hash("user", said)]))
    assert known == {fragment_hash("user", said)}
