"""Turns sent while the memory layer starts are recorded once it is ready, through a bounded queue (SPEC §9)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from proxy import config
from proxy.memory.recall.query import fragment_hash
from proxy.pipeline.chat_call import ChatCall, Reply
from proxy.pipeline.held_turns import HeldTurns
from proxy.store.postgres.pg_migrations import MIGRATION_LOCK
from proxy.tenancy import Tenant
from tests.conftest import Proxy
from tests.fake_upstream import FakeUpstream, completion


def a_turn(session: str, trace: str, provider_state: str | None = None) -> ChatCall:
    tenant = Tenant("t", config.from_dict({}, env={}).defaults, None, passthrough=True)
    return ChatCall(tenant, "u", session, trace, {}, [], None, {}, provider_state=provider_state)


def test_a_session_keeps_only_its_latest_turn_and_the_order_of_arrival() -> None:
    held = HeldTurns()
    for call in (a_turn("s1", "t1"), a_turn("s2", "t2"), a_turn("s1", "t3")):
        assert held.hold(call, Reply(200, b"answer"), 100)
    assert [t.call.trace_id for t in held.release()] == ["t2", "t3"]
    assert len(held) == 0 and held.held_bytes == 0


def test_each_turn_of_a_conversation_the_provider_holds_is_kept() -> None:
    held = HeldTurns()
    for trace in ("t1", "t2"):
        assert held.hold(a_turn("s1", trace, provider_state="previous_response_id"), Reply(200), 10)
    assert [t.call.trace_id for t in held.release()] == ["t1", "t2"]


def test_a_full_queue_holds_no_new_session_but_still_takes_a_sessions_newer_turn() -> None:
    held = HeldTurns(turns=2, size=10_000)
    assert held.hold(a_turn("s1", "t1"), Reply(200), 10) and held.hold(a_turn("s2", "t2"), Reply(200), 10)
    assert not held.hold(a_turn("s3", "t3"), Reply(200), 10)
    assert held.hold(a_turn("s1", "t4"), Reply(200), 10)  # replaces s1's, takes no more room
    assert [t.call.trace_id for t in held.release()] == ["t2", "t4"]


def test_the_queue_is_bounded_by_bytes_too() -> None:
    held = HeldTurns(turns=100, size=1_000)
    assert held.hold(a_turn("s1", "t1"), Reply(200, b"x" * 400), 100)
    assert not held.hold(a_turn("s2", "t2"), Reply(200, b"x" * 400), 200)
    assert held.hold(a_turn("s2", "t3"), Reply(200, b"x" * 400), 100)
    assert held.held_bytes == 1_000


@pytest.fixture
def backend() -> str:
    return "postgres"  # a replica migrating the database holds this one's start on a real lock


class Migration:
    """Another replica migrating the database: holds the migration lock until ``release``."""

    def __init__(self, url: str) -> None:
        self.conn = psycopg.connect(url, autocommit=True)
        self.conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))

    def release(self) -> None:
        if not self.conn.closed:
            self.conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))
            self.conn.close()


def test_turns_sent_while_the_memory_layer_starts_are_recorded_once_it_is_ready(
    make_proxy: Callable[..., Proxy], pg_url: str, upstream: FakeUpstream
) -> None:
    migration = Migration(pg_url)
    slow_reply = threading.Event()
    try:
        proxy = make_proxy(wait_ready=False)
        first = [{"role": "user", "content": "My sister Ines lives in Porto."}]
        degraded = [_chat(proxy, first, "ana")]
        second = [*first, {"role": "assistant", "content": "Hello from upstream"},
                  {"role": "user", "content": "Her birthday is on 12 May."}]
        degraded.append(_chat(proxy, second, "ana"))
        other = [{"role": "user", "content": "I am allergic to walnuts."}]
        degraded.append(_chat(proxy, other, "bo"))

        async def held_back(request: Request, body: dict[str, Any]) -> Response:
            import anyio

            await anyio.to_thread.run_sync(slow_reply.wait, 30)
            return JSONResponse(completion("Noted, you keep bees."))

        upstream.chat = held_back
        late = [{"role": "user", "content": "I keep bees on my roof."}]
        relayed: list[str | None] = []
        racing = threading.Thread(target=lambda: relayed.append(_chat(proxy, late, "cy")))
        racing.start()
        assert _wait_for(lambda: len(upstream.chat_requests()) == 4)
        migration.release()  # the layer starts while that request is still relayed
        proxy.wait_ready()
        slow_reply.set()
        racing.join(30)
    finally:
        slow_reply.set()
        migration.release()
    proxy.drain()
    assert degraded + relayed == ["starting"] * 4
    fragments = proxy.store.fragments
    said = {
        "ana": [("user", first[0]["content"]), ("user", second[2]["content"]), ("assistant", "Hello from upstream")],
        "bo": [("user", other[0]["content"]), ("assistant", "Hello from upstream")],
        "cy": [("user", late[0]["content"]), ("assistant", "Noted, you keep bees.")],
    }
    for user, turns in said.items():
        hashes = [fragment_hash(role, text) for role, text in turns]
        assert proxy.server.call(fragments.known("acme", user, hashes)) == set(hashes), user
    assert proxy.runtime.metrics.registry.get_sample_value("paperclip_held_turns_total", {"outcome": "held"}) == 4


def _chat(proxy: Proxy, messages: list[dict[str, str]], user: str) -> str | None:
    raw = proxy.client().chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=messages, user=user  # type: ignore[arg-type]
    )
    return raw.headers.get("x-paperclip-degraded")


def _wait_for(check: Callable[[], bool]) -> bool:
    done = threading.Event()
    for _ in range(3000):
        if check():
            return True
        done.wait(0.01)
    return False
