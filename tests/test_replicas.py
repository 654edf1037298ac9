"""Three ``paperclip serve`` processes on one PostgreSQL, in front of the fake upstream.

What replicas must agree on (issue 13): a range of a session is compressed
once whichever replicas its requests reach; a forget through one replica (a
user's, a conversation's) is seen by the next search on every other; a replica killed mid-compression
loses nothing, and another compresses the range once its lease runs out.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import yaml
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from proxy.store.lease import TTL_S as LEASE_S
from tests.conftest import ADMIN_KEY, PROXY_KEY, base_config
from tests.fake_upstream import FakeUpstream, completion, fake_summary
from tests.pg import PgServer
from tests.servers import ServeProcess

SUMMARIZE = "You are compressing the older part"
FACT = "My cat Zorblax is allergic to peanuts, remember that."


class Replica(ServeProcess):
    def __init__(self, config: Path, log: Path) -> None:
        super().__init__(config, log, "--log-level", "warning")


class Trio:
    def __init__(self, replicas: list[Replica], db_url: str) -> None:
        self.replicas, self.db_url = replicas, db_url

    def sql(self, query: str, *args: Any) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.db_url, autocommit=True) as conn:
            return conn.execute(query, args).fetchall()


@pytest.fixture(scope="module")
def trio_running(
    pg_server: PgServer, upstream_server: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Trio]:
    folder = tmp_path_factory.mktemp("replicas")
    _, db_url = pg_server.fresh_schema()
    raw = base_config(upstream_server[1].url + "/v1", folder / "unused.db")
    raw["storage"]["url"] = db_url
    raw["defaults"]["context"] = {"recent_window_tokens": 400, "summary_budget_tokens": 250}
    raw["defaults"]["compression"] = {"model": "fake-compressor", "timeout_s": 30}
    raw["defaults"]["memory"] = {"extract_every_messages": 1000}  # summaries only: countable calls
    config = folder / "proxy.yaml"
    config.write_text(yaml.safe_dump(raw))
    replicas = [Replica(config, folder / f"replica{i}.log").start() for i in range(3)]
    try:
        for r in replicas:
            r.wait_ready()
        yield Trio(replicas, db_url)
    finally:
        for r in replicas:
            r.stop()


@pytest.fixture
def trio(trio_running: Trio, upstream: FakeUpstream) -> Trio:
    for r in trio_running.replicas:  # a test that killed one leaves it to be restarted here
        if not r.alive():
            r.start().wait_ready()
    return trio_running


def _turn(i: int) -> str:
    words = "train ticket Lisbon Porto museum river budget hotel breakfast window seat ferry island"
    return f"Message {i}: " + " ".join(words.split()[(i + k) % 13] for k in range(18))


def _history(turns: int, first: str | None = None) -> list[dict[str, str]]:
    messages = []
    for i in range(turns):
        messages.append({"role": "user", "content": first if i == 0 and first else _turn(i)})
        messages.append({"role": "assistant", "content": f"Reply {i}: noted, " + _turn(i + 50)})
    return messages[:-1]  # ends on the user's turn


async def _send(
    client: httpx.AsyncClient, replica: Replica, messages: list[dict[str, str]], user: str, session: str
) -> httpx.Response:
    r = await client.post(
        replica.url + "/v1/chat/completions",
        json={"model": "gpt-4o-mini", "messages": messages},
        headers={"authorization": f"Bearer {PROXY_KEY}", "x-paperclip-user": user,
                 "x-paperclip-session": session},
    )
    assert r.status_code == 200, r.text
    return r


def _summaries(trio: Trio, session: str) -> list[tuple[int, int, int]]:
    return sorted(
        (int(level), int(start), int(end))
        for level, start, end in trio.sql(
            'SELECT level, start, "end" FROM summaries WHERE session = %s', session
        )
    )


def _summarize_calls(upstream: FakeUpstream) -> int:
    return sum(SUMMARIZE in r.body.decode("utf-8", "replace") for r in upstream.requests)


def _assert_each_range_once(summaries: list[tuple[int, int, int]]) -> None:
    level0 = [(s, e) for level, s, e in summaries if level == 0]
    assert level0 and level0[0][0] == 0
    # Consecutive, never overlapping: no range was summarised twice.
    assert all(a[1] == b[0] for a, b in itertools.pairwise(level0)), level0


async def _settled(trio: Trio, session: str, calls: Any) -> list[tuple[int, int, int]]:
    """The session's summaries once every summarize call the upstream saw has been stored."""
    deadline = time.monotonic() + 60
    while True:
        summaries = _summaries(trio, session)
        level0 = [s for s in summaries if s[0] == 0]
        if summaries and len(level0) >= calls():
            await asyncio.sleep(0.5)  # and nothing more comes
            if _summaries(trio, session) == summaries and len(level0) >= calls():
                return summaries
        assert time.monotonic() < deadline, f"summaries {summaries} vs {calls()} calls"
        await asyncio.sleep(0.1)


async def test_interleaved_requests_of_one_session_compress_each_range_once(
    trio: Trio, upstream: FakeUpstream
) -> None:
    async with httpx.AsyncClient(timeout=60) as client:
        for turns in range(4, 30, 2):
            history = _history(turns)
            # The same turn reaches every replica at once (retries, two tabs): all three race.
            await asyncio.gather(*(_send(client, r, history, "ana", "trip") for r in trio.replicas))
    summaries = await _settled(trio, "trip", lambda: _summarize_calls(upstream))
    _assert_each_range_once(summaries)
    assert _summarize_calls(upstream) == sum(1 for s in summaries if s[0] == 0)


async def test_a_forget_on_one_replica_is_seen_by_the_others_at_once(
    trio: Trio, upstream: FakeUpstream
) -> None:
    one, two, three = trio.replicas
    question = [{"role": "user", "content": "What is my cat allergic to?"}]
    async with httpx.AsyncClient(timeout=60) as client:
        await _send(client, one, _history(6, first=FACT), "bob", "bob-1")
        deadline = time.monotonic() + 30
        while not trio.sql("SELECT 1 FROM fragments WHERE \"user\" = 'bob' AND text LIKE '%%Zorblax%%'"):
            assert time.monotonic() < deadline, "the fact was never indexed"
            await asyncio.sleep(0.1)
        for replica in (two, three):  # their in-memory indexes of bob are loaded and hold the fact
            r = await _send(client, replica, question, "bob", "bob-2")
            assert int(r.headers["x-paperclip-memories"]) >= 1
            assert "Zorblax" in upstream.chat_requests()[-1].body.decode()
        forget = await client.delete(
            one.url + "/paperclip/v1/users/bob", headers={"authorization": f"Bearer {ADMIN_KEY}"}
        )
        assert forget.status_code == 200, forget.text
        for replica in (two, three, one):
            r = await _send(client, replica, question, "bob", "bob-3")
            assert r.headers["x-paperclip-memories"] == "0"
            assert "Zorblax" not in upstream.chat_requests()[-1].body.decode()


async def test_a_conversation_forgotten_on_one_replica_is_never_recalled_by_the_others(
    trio: Trio, upstream: FakeUpstream
) -> None:
    one, two, three = trio.replicas
    question = [{"role": "user", "content": "What is my cat allergic to?"}]
    async with httpx.AsyncClient(timeout=60) as client:
        await _send(client, one, _history(6, first=FACT), "dana", "dana-1")
        deadline = time.monotonic() + 30
        while not trio.sql("SELECT 1 FROM fragments WHERE \"user\" = 'dana' AND text LIKE '%%Zorblax%%'"):
            assert time.monotonic() < deadline, "the fact was never indexed"
            await asyncio.sleep(0.1)
        for replica in (two, three):  # their in-memory indexes of dana are loaded and hold the fact
            await _send(client, replica, question, "dana", "dana-2")
            assert "Zorblax" in upstream.chat_requests()[-1].body.decode()
        forget = await client.delete(
            one.url + "/paperclip/v1/sessions/dana-1", headers={"authorization": f"Bearer {ADMIN_KEY}"}
        )
        assert forget.status_code == 200 and forget.json()["counts"]["fragments"] >= 11, forget.text
        for replica in (two, three, one):
            await _send(client, replica, question, "dana", "dana-3")
            assert "Zorblax" not in upstream.chat_requests()[-1].body.decode()


async def test_a_replica_killed_mid_compression_loses_nothing(trio: Trio, upstream: FakeUpstream) -> None:
    doomed, survivor, _ = trio.replicas
    started = asyncio.Event()
    loop = asyncio.get_running_loop()

    async def slow_first_summary(request: Request, body: dict[str, Any]) -> Response:
        if SUMMARIZE in json.dumps(body) and not started.is_set():
            loop.call_soon_threadsafe(started.set)
            await asyncio.sleep(30)  # the doomed replica waits here when it is killed
        return JSONResponse(completion(fake_summary(body["messages"])))

    upstream.compression = slow_first_summary
    history = _history(12)
    async with httpx.AsyncClient(timeout=60) as client:
        await _send(client, doomed, history, "cy", "cy-1")
        await asyncio.wait_for(started.wait(), 30)  # its compression is in flight
        doomed.kill()
        killed_at = time.monotonic()
        history = _history(14)
        await _send(client, survivor, history, "cy", "cy-1")  # the lease is still the dead one's
        await asyncio.sleep(0.5)
        assert _summaries(trio, "cy-1") == []
        await asyncio.sleep(max(0.0, LEASE_S + 1 - (time.monotonic() - killed_at)))
        await _send(client, survivor, history, "cy", "cy-1")  # now the survivor takes it over
    summaries = await _settled(trio, "cy-1", lambda: _summarize_calls(upstream) - 1)
    _assert_each_range_once(summaries)
    assert _summarize_calls(upstream) - 1 == sum(1 for s in summaries if s[0] == 0)
    # Every message the client sent is a fragment, though the killed replica indexed none of its turn.
    texts = {row[0] for row in trio.sql("SELECT text FROM fragments WHERE \"user\" = 'cy'")}
    assert {m["content"] for m in history} <= texts
