"""Where SQLite calls run: on the writer's and the readers' threads; only a quick read is tried on the caller's."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from proxy.store.sqlite.sqlite_database import Connection, Database


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    db = Database(str(tmp_path / "t.db"))
    db.run_sync(lambda c: c.execute("CREATE TABLE t (n INTEGER)"))
    yield db
    db.close()


def where(c: Connection) -> str:
    return threading.current_thread().name


async def test_reads_run_on_the_reader_pool_and_writes_on_the_one_writer_thread(db: Database) -> None:
    here = threading.current_thread().name
    reads = await asyncio.gather(*(db.read(where) for _ in range(8)))
    writes = await asyncio.gather(*(db.write(where) for _ in range(8)))
    assert here not in reads and all(name.startswith("paperclip-db-reader") for name in reads)
    assert set(writes) == {writes[0]} and writes[0].startswith("paperclip-db-writer")


async def test_a_write_while_another_process_writes_waits_off_the_loop(db: Database) -> None:
    """Another replica on the same file holds SQLite's write lock: the loop keeps running meanwhile."""
    other = Database(db.path)  # its own connections, as another process's would be
    held, release = threading.Event(), threading.Event()

    def long_write(c: Connection) -> None:
        c.execute("INSERT INTO t VALUES (1)")
        held.set()
        release.wait(30)

    try:
        busy = asyncio.ensure_future(asyncio.to_thread(other.run_sync, long_write))
        assert await asyncio.to_thread(held.wait, 30)
        queued = asyncio.ensure_future(db.write(lambda c: c.execute("INSERT INTO t VALUES (2)")))
        ticks = 0
        while ticks < 5:  # the loop keeps running while the write waits for the other's lock
            await asyncio.sleep(0.01)
            ticks += 1
        assert not queued.done()
        release.set()
        await busy
        await queued
        assert await db.read(lambda c: [r[0] for r in c.execute("SELECT n FROM t ORDER BY rowid")]) == [1, 2]
    finally:
        release.set()
        other.close()


async def test_a_quick_read_answers_on_the_callers_thread(db: Database) -> None:
    await db.write(lambda c: c.executemany("INSERT INTO t VALUES (?)", [(n,) for n in range(100)]))
    here = threading.current_thread().name
    seen: list[str] = []

    def total(c: Connection) -> int:
        seen.append(threading.current_thread().name)
        return int(c.execute("SELECT sum(n) FROM t").fetchone()[0])

    assert await db.read(total, quick=True) == await db.read(total) == sum(range(100))
    assert seen[0] == here and seen[1].startswith("paperclip-db-reader")


async def test_a_quick_read_past_its_budget_is_finished_on_a_reader_thread(db: Database) -> None:
    """SQLite is stopped on the caller's thread after QUICK_READ_S; the read runs whole on a reader's."""
    seen: list[str] = []

    def slow(c: Connection) -> int:  # a few hundred ms of SQLite's work, far past the budget
        seen.append(threading.current_thread().name)
        sql = "WITH RECURSIVE k(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM k WHERE x < 2000000) SELECT count(*) FROM k"
        return int(c.execute(sql).fetchone()[0])

    assert await db.read(slow, quick=True) == 2_000_000
    assert seen[0] == threading.current_thread().name and len(seen) == 2
    assert seen[1].startswith("paperclip-db-reader")

