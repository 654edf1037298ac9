"""A database that stops answering degrades requests within ``storage.timeout_s``, turns ``/readyz``
false, and is used again without a restart once it answers (SPEC §9; issue 26, defect 3)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import httpx
import pytest

from proxy.memory.recall.query import fragment_hash
from proxy.store.interface import DatabaseUnavailable
from proxy.store.postgres.pg_database import PgDatabase
from proxy.store.sqlite.sqlite_database import BUSY_TIMEOUT_MS, Connection, Database
from tests.conftest import PROXY_KEY, Proxy
from tests.pg import PgServer, a_server

own_pg = pytest.fixture(scope="module")(a_server)  # a PostgreSQL of this module's own, stopped and started


@pytest.fixture
def storage_url(own_pg: PgServer) -> Iterator[str]:
    yield from own_pg.schema_url()


def chat(proxy: Proxy, text: str, user: str = "ola") -> httpx.Response:
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}], "user": user}
    with httpx.Client(base_url=proxy.url, timeout=10) as http:  # the client's patience, not a measure
        return http.post("/v1/chat/completions", json=body, headers={"authorization": f"Bearer {PROXY_KEY}"})


def ready(proxy: Proxy) -> bool:
    with httpx.Client(base_url=proxy.url, timeout=10) as http:
        return http.get("/readyz").status_code == 200


def until(check: Callable[[], bool], tries: int = 600) -> bool:
    pause = threading.Event()
    for _ in range(tries):
        if check():
            return True
        pause.wait(0.05)
    return False


def test_a_stopped_postgresql_degrades_requests_and_is_used_again_once_it_is_back(
    make_proxy: Callable[..., Proxy], own_pg: PgServer
) -> None:
    proxy = make_proxy(storage={"timeout_s": 1})
    before = chat(proxy, "I live in Tromsø.")
    assert before.status_code == 200 and "x-paperclip-degraded" not in before.headers
    proxy.drain()
    own_pg.halt()
    try:
        during = [chat(proxy, f"Question {n} while the database is down") for n in range(3)]
        assert [r.status_code for r in during] == [200] * 3
        assert {r.headers.get("x-paperclip-degraded") for r in during} == {"store_unavailable"}
        assert until(lambda: not ready(proxy))
        with httpx.Client(base_url=proxy.url, timeout=10) as http:
            readyz = http.get("/readyz").json()
            listed = http.get("/paperclip/v1/users/ola/memories", headers={"authorization": "Bearer ak-test-acme"})
        assert readyz["checks"]["database"] is False and "PostgreSQL" in readyz["reason"]
        assert listed.status_code == 503 and listed.json()["error"]["code"] == "store_unavailable"
    finally:
        own_pg.resume()
    assert until(lambda: ready(proxy))
    after = chat(proxy, "I keep two cats.")
    assert after.status_code == 200 and "x-paperclip-degraded" not in after.headers
    proxy.drain()
    said = [fragment_hash("user", "I live in Tromsø."), fragment_hash("user", "I keep two cats.")]
    assert proxy.server.call(proxy.store.fragments.known("acme", "ola", said)) == set(said)


def test_a_postgresql_that_stops_answering_is_not_ready_within_five_seconds(
    make_proxy: Callable[..., Proxy], own_pg: PgServer
) -> None:
    """Frozen, not stopped: its sockets stay open and nothing answers (SPEC §9: /readyz false within 5 s).
    Giving up a query on a frozen server takes the driver up to 10 s; the readiness check does not wait."""
    proxy = make_proxy(storage={"timeout_s": 1})
    assert chat(proxy, "I live in Tromsø.").status_code == 200
    proxy.drain()
    own_pg.freeze()
    try:
        assert until(lambda: not ready(proxy), tries=100)  # 100 × 50 ms
        during = chat(proxy, "A question while the database is frozen")
        assert during.status_code == 200 and during.headers.get("x-paperclip-degraded") == "store_unavailable"
    finally:
        own_pg.thaw()
    assert until(lambda: ready(proxy))
    after = chat(proxy, "I keep two cats.")
    assert after.status_code == 200 and "x-paperclip-degraded" not in after.headers


@pytest.fixture
async def pg_db(storage_url: str) -> AsyncIterator[PgDatabase]:
    db = await PgDatabase.open(storage_url, 8)
    yield db
    await db.close()


async def answers(db: PgDatabase) -> bool:
    async with db.connection() as conn:
        return bool(await (await conn.execute("SELECT 1")).fetchone() == (1,))


async def test_a_bounded_postgresql_call_gives_up_and_the_pool_serves_on(pg_db: PgDatabase) -> None:
    with pytest.raises(DatabaseUnavailable):
        async with pg_db.bounded(0.2).connection() as conn:
            await conn.execute("SELECT pg_sleep(5)")
    # Late, so taken for gone and rechecked at once: a database that answers a fresh connection is used
    # again as soon as the recheck's ping ends (it may have ended already: a local connection is quick).
    recheck = pg_db.reach.recheck
    if recheck is not None:
        async with asyncio.timeout(3):
            await recheck
    assert pg_db.reach.gone is None and await answers(pg_db.bounded(2))


async def test_a_dropped_connection_makes_bounded_calls_give_up_at_once_until_a_ping_finds_the_database(
    pg_db: PgDatabase, storage_url: str
) -> None:
    import psycopg

    async with await psycopg.AsyncConnection.connect(storage_url, autocommit=True) as other:
        with pytest.raises(DatabaseUnavailable):
            async with pg_db.bounded(60).connection() as conn:
                await other.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))
                await conn.execute("SELECT 1")
    # The database is up, yet taken for gone: no bounded call waits for the pool meanwhile.
    assert pg_db.reach.gone is not None and "PostgreSQL is unavailable" in pg_db.reach.gone
    with pytest.raises(DatabaseUnavailable):
        await answers(pg_db.bounded(60))
    assert await answers(pg_db)  # the admin API and maintenance wait, as ever
    await pg_db.ping()
    assert pg_db.reach.gone is None and await answers(pg_db.bounded(60))


async def test_a_bounded_call_on_a_frozen_postgresql_gives_up_at_its_bound_not_after_the_drivers_cancel(
    pg_db: PgDatabase, own_pg: PgServer
) -> None:
    """SIGSTOP: its sockets stay open and nothing answers. Cancelling the query would have the driver ask
    the server to cancel it and wait for that up to 10 s; the request's bound is ``timeout_s``."""
    assert await answers(pg_db.bounded(2))  # a pooled connection open before the freeze
    own_pg.freeze()
    try:
        async with asyncio.timeout(3):  # the bound, 0.5 s, and room to spare; the driver's cancel is 5-10 s
            with pytest.raises(DatabaseUnavailable, match=r"did not answer within 0\.5 s"):
                async with pg_db.bounded(0.5).connection() as conn:
                    await conn.execute("SELECT 1")
    finally:
        own_pg.thaw()
    await pg_db.ping()  # as /readyz's watcher does every second
    assert pg_db.reach.gone is None and await answers(pg_db.bounded(5))


async def test_calls_after_one_cut_on_a_frozen_postgresql_give_up_at_once_not_each_at_its_bound(
    pg_db: PgDatabase, own_pg: PgServer
) -> None:
    """Four requests prepare at once: those queued behind a call cut at the bound must not wait a bound more
    each (a request in flight at a freeze took twice ``timeout_s``). A late call has the database rechecked
    on a fresh connection at once; until that answers, bounded calls give up at once."""
    assert await answers(pg_db.bounded(2))
    own_pg.freeze()
    try:
        with pytest.raises(DatabaseUnavailable, match="did not answer within"):
            async with pg_db.bounded(0.5).connection() as conn:
                await conn.execute("SELECT 1")
        async with asyncio.timeout(1):  # at once, not at its bound of 5 s
            with pytest.raises(DatabaseUnavailable):
                await answers(pg_db.bounded(5))
        await asyncio.sleep(1.5)  # the recheck's fresh connection cannot reach a frozen server either
        assert pg_db.reach.gone is not None
    finally:
        own_pg.thaw()
    await pg_db.ping()  # as /readyz's watcher does every second
    assert pg_db.reach.gone is None and await answers(pg_db.bounded(5))


async def test_a_frozen_postgresql_a_ping_cannot_reach_makes_bounded_calls_give_up_at_once_until_one_can(
    pg_db: PgDatabase, own_pg: PgServer
) -> None:
    """Requests queued behind the first ones (four prepare at once) must not each wait their bound."""
    own_pg.freeze()
    try:
        with pytest.raises(DatabaseUnavailable):
            await pg_db.ping()
        assert pg_db.reach.gone is not None
        async with asyncio.timeout(5):  # at once, taken for gone: not at the bound, 60 s
            with pytest.raises(DatabaseUnavailable, match="PostgreSQL is unavailable"):
                await answers(pg_db.bounded(60))
    finally:
        own_pg.thaw()
    await pg_db.ping()
    assert pg_db.reach.gone is None and await answers(pg_db.bounded(5))


async def test_a_statement_the_server_cancels_gives_up_alone(pg_db: PgDatabase) -> None:
    with pytest.raises(DatabaseUnavailable):
        async with pg_db.bounded(60).connection() as conn:
            await conn.execute("SET statement_timeout = '50ms'")
            try:
                await conn.execute("SELECT pg_sleep(2)")
            finally:
                await conn.execute("RESET statement_timeout")
    assert pg_db.reach.gone is None and await answers(pg_db.bounded(60))  # slow, not gone


@pytest.fixture
def sqlite_db(tmp_path: Path) -> Iterator[Database]:
    db = Database(str(tmp_path / "locked.db"))
    db.run_sync(lambda c: c.execute("CREATE TABLE t (n INTEGER)"))
    yield db
    db.close()


async def test_a_write_to_a_sqlite_file_another_process_has_locked_gives_up_within_the_bound(
    sqlite_db: Database,
) -> None:
    other = Database(sqlite_db.path)  # another process's connections to the same file
    holding, release = threading.Event(), threading.Event()

    def hold_the_lock(c: Connection) -> None:
        c.execute("INSERT INTO t VALUES (1)")
        holding.set()
        release.wait(30)

    holder = threading.Thread(target=other.run_sync, args=(hold_the_lock,))
    holder.start()
    try:
        assert holding.wait(30)
        with pytest.raises(DatabaseUnavailable):
            await sqlite_db.bounded(0.2).write(lambda c: c.execute("INSERT INTO t VALUES (2)"))
        # Reads do not wait for a writer (WAL), bounded or not.
        assert await sqlite_db.bounded(0.2).read(lambda c: c.execute("SELECT count(*) FROM t").fetchone()[0]) == 0
    finally:
        release.set()
        holder.join(30)
        other.close()
    await sqlite_db.bounded(2).write(lambda c: c.execute("INSERT INTO t VALUES (3)"))
    assert await sqlite_db.read(lambda c: [r[0] for r in c.execute("SELECT n FROM t ORDER BY n")]) == [1, 3]


async def test_a_bounded_write_waits_for_the_lock_only_what_is_left_of_its_bound(sqlite_db: Database) -> None:
    def busy(c: Connection) -> int:
        return int(c.execute("PRAGMA busy_timeout").fetchone()[0])

    assert await sqlite_db.bounded(2).write(busy) == 2000
    assert await sqlite_db.bounded(2).write(busy) == 2000
    assert await sqlite_db.write(busy) == BUSY_TIMEOUT_MS  # an unbounded write waits as long as ever
    assert await sqlite_db.bounded(0.25).write(busy) == 300  # rounded up to the grid, never down
    # Queued behind a write of half a second: what is left of its bound, not all of it.
    ahead = asyncio.ensure_future(sqlite_db.write(lambda c: time.sleep(0.5)))
    await asyncio.sleep(0.05)
    left = await sqlite_db.bounded(2).write(busy)
    await ahead
    assert 1000 <= left <= 1600
    assert await sqlite_db.bounded(2).write(busy) == 2000
