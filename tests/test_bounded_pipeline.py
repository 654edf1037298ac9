"""The memory pipeline on the server's loop: prepares and records bounded, the loop free for sockets."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from proxy import config
from proxy.errors import MemoryBusy
from proxy.memory.recall.query import fragment_hash
from proxy.pipeline.bounded_pipeline import BoundedPipeline
from proxy.pipeline.catch_up import CatchUp
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
        self.order: list[tuple[str, bool]] = []  # (trace, covered) of each record, as it started
        self.prepared = 0
        self.records = asyncio.Event()
        self.prepares = asyncio.Event()
        self.prepares.set()
        self.in_prepare = threading.Event()  # read from the test's own thread in the proxy tests
        self.changed = asyncio.Condition()
        self.catching_up = CatchUp(None)

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

    async def catch_up(self, call: ChatCall) -> None:
        return None

    def due(self, call: ChatCall) -> contextlib.AbstractContextManager[None]:
        return self.catching_up.recording((call.tenant.id, call.user, call.session))

    async def prepare(self, call: ChatCall) -> Prepared:
        self.in_prepare.set()
        await self._held("prepare", self.prepares)
        self.prepared += 1
        return Prepared(messages=None, tokens_in=1, tokens_forwarded=1)

    def covers(self, newer: Prepared, older: Prepared) -> bool:
        """A conversation (the messages of ``Prepared``, here) covers those it continues."""
        new, old = newer.messages or [], older.messages or []
        return bool(old) and new[: len(old)] == old

    async def record(self, call: ChatCall, prepared: Prepared, reply: Reply, *, covered: bool = False) -> None:
        self.order.append((call.trace_id, covered))
        if not covered:  # what a covered record keeps is its own few writes: it is not held here
            await self._held("record", self.records)
        self.recorded += 1


def a_call(trace: str = "t-1", session: str = "s", provider_state: str | None = None) -> ChatCall:
    settings = config.from_dict({}, env={})
    tenant = Tenant("t", settings.defaults, None, passthrough=True)
    return ChatCall(tenant, "u", session, trace, {}, [], None, {}, provider_state=provider_state)


def said(*texts: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": t} for t in texts]


def recording(pipeline: BoundedPipeline, call: ChatCall, conversation: list[dict[str, Any]] | None = None
              ) -> asyncio.Future[None]:
    """``call``'s record (of ``conversation``, for ``Gate.covers``), started."""
    return asyncio.ensure_future(pipeline.record(call, Prepared(conversation, 1, 1), Reply(200)))


def growing(n: int) -> list[dict[str, Any]]:
    """The conversation as its ``n``-th request sends it."""
    return said(*(f"turn {i}" for i in range(n + 1)))


async def one_running(inner: Gate, pipeline: BoundedPipeline) -> asyncio.Future[None]:
    """Session ``s``'s record ``t-0``, started and held running."""
    running = recording(pipeline, a_call("t-0"), growing(0))
    await inner.wait_running("record", 1)
    return running


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
    records = [asyncio.ensure_future(pipeline.record(a_call(f"t-{i}", f"s-{i}"), prepared, Reply(200))) for i in range(5)]
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
    held = [asyncio.ensure_future(pipeline.record(a_call(f"t-{i}", f"s-{i}"), prepared, Reply(200))) for i in range(2)]
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


async def test_a_sessions_records_run_one_after_the_other_while_other_sessions_run_beside() -> None:
    inner = Gate()
    pipeline = BoundedPipeline(inner, records=4, waiting=10)
    first = recording(pipeline, a_call("a-1", "a"))
    await inner.wait_running("record", 1)
    second = recording(pipeline, a_call("a-2", "a"))
    other = recording(pipeline, a_call("b-1", "b"))
    await inner.wait_running("record", 2)
    await asyncio.sleep(0.1)  # slots are free: room for a-2 to start, were it allowed to
    assert inner.order == [("a-1", False), ("b-1", False)] and pipeline.backlog == 3
    # a-2, waiting its turn, is due all the same: it holds chat a's last words, and a request of the user in
    # another chat that waited only for the running record would recall without them (``catch_up``).
    assert len(inner.catching_up.records_of_others("t", "u", "b")) == 2
    inner.records.set()
    await asyncio.gather(first, second, other)
    assert inner.order == [("a-1", False), ("b-1", False), ("a-2", False)] and pipeline.backlog == 0
    assert inner.catching_up.records_of_others("t", "u", "c") == []


async def test_a_sessions_waiting_record_gives_way_to_its_newer_one_which_records_for_both() -> None:
    inner = Gate()
    told: list[None] = []
    pipeline = BoundedPipeline(inner, records=1, waiting=10, on_covered=lambda: told.append(None))
    running = await one_running(inner, pipeline)
    later = []
    for i in range(1, 5):  # the client goes on talking while its first turn is recorded
        later.append(recording(pipeline, a_call(f"t-{i}"), growing(i)))
        await asyncio.sleep(0.01)
    # t-1..t-3 kept what was their own at once; t-4 waits, the one record the session still owes.
    assert inner.order == [("t-0", False), ("t-1", True), ("t-2", True), ("t-3", True)]
    assert pipeline.backlog == 2 and pipeline.covered == len(told) == 3 and all(r.done() for r in later[:3])
    inner.records.set()
    await asyncio.gather(running, *later)
    assert inner.order[-1] == ("t-4", False) and inner.recorded == 5 and pipeline.backlog == 0
    assert pipeline.sessions_recording == 0  # nothing kept of a session with no record left


async def test_a_session_that_falls_behind_holds_one_waiting_record_so_new_requests_keep_their_memory() -> None:
    inner = Gate()
    pipeline = BoundedPipeline(inner, records=1, waiting=2, room_wait_s=0.05)
    records = [await one_running(inner, pipeline)]
    records += [recording(pipeline, a_call(f"t-{i}"), growing(i)) for i in range(1, 20)]
    await asyncio.sleep(0.05)
    assert pipeline.backlog == 2  # one running, one waiting: 18 gave way
    assert (await pipeline.prepare(a_call("t-next"))).tokens_in == 1  # room: no memory_busy
    inner.records.set()
    await asyncio.gather(*records)
    assert [t for t, covered in inner.order if not covered] == ["t-0", "t-19"]


async def test_chats_that_share_a_session_id_but_not_their_history_cover_nothing_of_each_other() -> None:
    inner = Gate()
    pipeline = BoundedPipeline(inner, records=1, waiting=10)
    running = await one_running(inner, pipeline)
    tab_a = recording(pipeline, a_call("a-1"), said("hi", "plan my trip to Oslo"))
    tab_b = recording(pipeline, a_call("b-1"), said("hi", "fix my bike"))
    await asyncio.sleep(0.05)
    assert pipeline.covered == 0 and pipeline.backlog == 3
    tab_a_again = recording(pipeline, a_call("a-2"), said("hi", "plan my trip to Oslo", "in May"))
    await asyncio.sleep(0.05)
    assert tab_a.done() and pipeline.covered == 1  # a-2 continues a-1's chat, not b-1's
    inner.records.set()
    await asyncio.gather(running, tab_b, tab_a_again)
    assert [t for t, covered in inner.order if not covered] == ["t-0", "b-1", "a-2"]  # in the order they came


async def test_records_of_a_conversation_the_provider_holds_each_run_whole() -> None:
    inner = Gate()
    pipeline = BoundedPipeline(inner, records=1, waiting=10)
    records = [recording(pipeline, a_call(f"t-{i}", provider_state="previous_response_id")) for i in range(3)]
    await inner.wait_running("record", 1)
    await asyncio.sleep(0.05)
    assert pipeline.backlog == 3 and pipeline.covered == 0
    inner.records.set()
    await asyncio.gather(*records)
    assert inner.order == [("t-0", False), ("t-1", False), ("t-2", False)]


async def test_a_record_cancelled_while_it_waits_leaves_no_slot_taken_and_no_session_behind() -> None:
    inner = Gate()
    pipeline = BoundedPipeline(inner, records=1, waiting=10)
    running = await one_running(inner, pipeline)
    waiting = recording(pipeline, a_call("t-1"))
    await asyncio.sleep(0.05)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    inner.records.set()
    await running
    assert pipeline.backlog == 0 and pipeline.sessions_recording == 0
    await recording(pipeline, a_call("t-2", "other"))  # the one slot is free
    assert inner.order[-1] == ("t-2", False)


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
    with httpx.Client(base_url=proxy.url, timeout=10) as http:
        shown = http.get("/metrics").text
    assert "\npaperclip_records 0.0\n" in shown and "\npaperclip_records_covered_total 0.0\n" in shown
    known = proxy.server.call(proxy.store.fragments.known("acme", "cat-owner", [fragment_hash("user", said)]))
    assert known == {fragment_hash("user", said)}
