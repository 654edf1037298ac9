"""Where SQLite calls run: the writer's and the readers' threads, or at once on a thread served inline."""

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


def where(c: Connection) -> int:
    return threading.get_ident()


async def test_calls_hop_to_the_stores_threads_unless_this_thread_is_served_inline(db: Database) -> None:
    here = threading.get_ident()
    assert await db.read(where) != here
    assert await db.write(where) != here
    db.serve_inline(here)
    assert await db.read(where) == here
    assert await db.write(where) == here


async def test_an_inline_write_sees_committed_rows_and_rolls_back_on_error(db: Database) -> None:
    db.serve_inline(threading.get_ident())
    await db.write(lambda c: c.execute("INSERT INTO t VALUES (1)"))

    def fail(c: Connection) -> None:
        c.execute("INSERT INTO t VALUES (2)")
        raise ValueError("no")

    with pytest.raises(ValueError):
        await db.write(fail)
    assert await db.read(lambda c: [r[0] for r in c.execute("SELECT n FROM t")]) == [1]
    # The writer's thread sees the same: one writer connection, whoever calls it.
    assert await asyncio.to_thread(db.run_sync, lambda c: c.execute("SELECT count(*) FROM t").fetchone()[0]) == 1


async def test_an_inline_write_while_the_writer_is_busy_queues_instead_of_blocking_the_loop(db: Database) -> None:
    db.serve_inline(threading.get_ident())
    held, release = threading.Event(), threading.Event()

    def long_write(c: Connection) -> None:
        held.set()
        release.wait(30)
        c.execute("INSERT INTO t VALUES (1)")

    busy = asyncio.ensure_future(asyncio.to_thread(db.run_sync, long_write))
    assert await asyncio.to_thread(held.wait, 30)
    queued = asyncio.ensure_future(db.write(lambda c: (c.execute("INSERT INTO t VALUES (2)"), where(c))[1]))
    await asyncio.sleep(0.05)
    assert not queued.done()  # waiting its turn on the writer's thread, and this loop runs meanwhile
    release.set()
    await busy
    assert await queued != threading.get_ident()
    assert await db.read(lambda c: [r[0] for r in c.execute("SELECT n FROM t ORDER BY rowid")]) == [1, 2]


async def test_an_inline_write_while_another_process_writes_queues_instead_of_blocking_the_loop(
    db: Database, tmp_path: Path
) -> None:
    """Another replica on the same file holds SQLite's write lock: the inline thread must not wait for it."""
    other = Database(db.path)  # its own connections, as another process's would be
    db.serve_inline(threading.get_ident())
    held, release = threading.Event(), threading.Event()

    def long_write(c: Connection) -> None:
        c.execute("INSERT INTO t VALUES (1)")
        held.set()
        release.wait(30)

    try:
        busy = asyncio.ensure_future(asyncio.to_thread(other.run_sync, long_write))
        assert await asyncio.to_thread(held.wait, 30)
        queued = asyncio.ensure_future(db.write(lambda c: (c.execute("INSERT INTO t VALUES (2)"), where(c))[1]))
        ticks = 0
        while ticks < 5:  # the loop keeps running while the write waits for the other's lock
            await asyncio.sleep(0.01)
            ticks += 1
        assert not queued.done()
        release.set()
        await busy
        assert await queued != threading.get_ident()  # it went to the writer's thread, which waited
        assert await db.read(lambda c: [r[0] for r in c.execute("SELECT n FROM t ORDER BY rowid")]) == [1, 2]
        # With the lock free again, the next write runs inline.
        assert await db.write(where) == threading.get_ident()
    finally:
        release.set()
        other.close()
