"""SQLite access: one writer thread, a pool of reader threads, sqlite-vec loaded on every connection.

Datasette's pattern: all writes go through a single writer connection
(SQLite allows one writer; serialising them in-process avoids ``database is
locked`` storms), reads run in parallel on their own connections under WAL.
Each ``write`` call is one explicit transaction. Every write runs on the
writer thread and every read on a reader thread, never on the event loop:
sqlite3 releases the GIL while SQLite works, so the loop serves meanwhile.

One exception, the request path's point reads (``read(fn, quick=True)``: a
session's prefix, an extraction cursor, the items' version, the fragments
stored since the index last looked, the sources of some fragments; never a
read whose size grows with the chat, which would be stopped and run again
on a thread, its first try wasted): a hand-off to a thread and back costs
more than the read itself (a wake-up of each side and the GIL passed twice;
under load, ~1 ms of CPU a request over five such reads). Such a read is
tried on the caller's thread first, on a connection of its own that never
waits for a lock, and SQLite is stopped after ``QUICK_READ_S`` of work (a
progress handler); a read stopped so, refused by a lock or failing in any
other way of SQLite's is run again on a reader thread, where it takes the
ordinary path with its timeout and its errors. So the loop gives at most
``QUICK_READ_S`` (and the building of the rows found in it) to a read; the
one wait not cut short is a page read from disk itself (these reads touch a
few pages of the indexes, nearly always in the OS's cache).

Extension loading: the stdlib ``sqlite3`` where it was built with
``enable_load_extension``, else ``sqlean`` (a drop-in with extensions on all
platforms).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import math
import sqlite3
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from ..interface import DatabaseUnavailable

T = TypeVar("T")
Connection = Any  # sqlite3.Connection or sqlean's equivalent: same API
BUSY_TIMEOUT_MS = 30_000  # how long a call waits for another process's write lock
QUICK_READ_S = 0.001  # of SQLite's work for a quick read on the caller's thread (see the docstring)
QUICK_STEPS = 1_000  # virtual machine steps between two looks at the clock (a few µs)
# A bounded write's wait for the lock is what is left of its bound, rounded up to this grid: a
# write taken up at once finds the writer's busy timeout already set, and sets nothing.
BUSY_GRID_MS = 100


def _driver() -> Any:
    probe = sqlite3.connect(":memory:")
    try:
        if hasattr(probe, "enable_load_extension"):
            return sqlite3
    finally:
        probe.close()
    import sqlean

    return sqlean


def connect(path: str, *, readonly: bool = False) -> Connection:
    import sqlite_vec

    driver = _driver()
    conn = driver.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
    conn.enable_load_extension(True)
    sqlite_vec.load(conn)
    conn.enable_load_extension(False)
    conn.row_factory = driver.Row
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA foreign_keys = ON")
    if not readonly:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        # Forgotten users must not be readable from free pages of the file.
        conn.execute("PRAGMA secure_delete = ON")
    return conn


class _Connections:
    """The threads and connections of one database file, shared by its bounded and unbounded façades."""

    def __init__(self, path: str, readers: int) -> None:
        self.path = path
        self.writer = ThreadPoolExecutor(1, thread_name_prefix="paperclip-db-writer")
        self.readers = ThreadPoolExecutor(readers, thread_name_prefix="paperclip-db-reader")
        self.local = threading.local()
        self.write_conn: Connection | None = None
        self.write_busy_ms = BUSY_TIMEOUT_MS  # the writer connection's busy timeout, as last set
        self.all: list[Connection] = []
        self.lock = threading.Lock()
        self.write_lock = threading.Lock()  # the writer connection: one transaction at a time

    def writer_conn(self) -> Connection:
        if self.write_conn is None:
            self.write_conn = connect(self.path)
            self.all.append(self.write_conn)
        return self.write_conn

    def wait_for_lock(self, conn: Connection, ms: int) -> None:
        """Set the writer connection's busy timeout to ``ms``, unless it is set so already."""
        if ms != self.write_busy_ms:
            conn.execute(f"PRAGMA busy_timeout = {ms}")
            self.write_busy_ms = ms

    def reader_conn(self) -> Connection:
        return self._thread_conn("conn")

    def quick(self, fn: Callable[[Connection], T], budget_s: float) -> T:
        """``fn`` on this thread's quick connection, SQLite stopped past ``budget_s`` of work."""
        conn = self._thread_conn("quick", busy_timeout_ms=0)  # a lock held elsewhere: straight to the readers
        deadline = time.perf_counter() + budget_s
        conn.set_progress_handler(lambda: time.perf_counter() > deadline, QUICK_STEPS)
        try:
            return fn(conn)
        finally:
            conn.set_progress_handler(None, 0)

    def _thread_conn(self, name: str, busy_timeout_ms: int | None = None) -> Connection:
        """This thread's read-only connection called ``name``, opened on first use."""
        conn = getattr(self.local, name, None)
        if conn is None:
            conn = connect(self.path, readonly=True)
            if busy_timeout_ms is not None:
                conn.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}")
            setattr(self.local, name, conn)
            with self.lock:
                self.all.append(conn)
        return conn


class Database:
    """Async façade: ``await db.write(fn)`` runs ``fn(conn)`` in a transaction on the writer thread.

    ``bounded(timeout_s)`` is the same database whose calls give up after
    ``timeout_s`` (``DatabaseUnavailable``), counted from the call: a write
    waits for another process's write lock only for what is left of that
    time when the writer thread takes it up (rounded up to ``BUSY_GRID_MS``),
    and a call that has not finished by then — queued behind others, or
    slow — is abandoned by its caller (one not yet started never runs; a
    write whose caller gave up rolls back rather than commit, so what the
    caller was told failed is not stored).
    """

    def __init__(self, path: str, *, readers: int = 4) -> None:
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.timeout_s: float | None = None
        self._conns = _Connections(path, readers)

    def bounded(self, timeout_s: float) -> Database:
        view = copy.copy(self)
        view.timeout_s = timeout_s
        return view

    def write_sync(self, fn: Callable[[Connection], T], deadline: _Deadline | None = None) -> T:
        """Run ``fn`` in one transaction on the writer connection, from the calling thread.

        ``deadline``: a bounded write's, when its caller gives up (``bounded``).
        """
        with self._conns.write_lock:
            conn = self._conns.writer_conn()
            if self.timeout_s is None:
                self._conns.wait_for_lock(conn, BUSY_TIMEOUT_MS)
                return _transaction(conn, fn)
            left = deadline.left() if deadline is not None else self.timeout_s
            if left <= 0:
                raise DatabaseUnavailable(f"the SQLite database did not answer within {self.timeout_s:g} s")
            self._conns.wait_for_lock(conn, math.ceil(left * 1000 / BUSY_GRID_MS) * BUSY_GRID_MS)
            return _transaction(conn, fn, deadline)

    async def write(self, fn: Callable[[Connection], T]) -> T:
        if self.timeout_s is None:
            return await self._call(self._conns.writer, self.write_sync, fn)
        deadline = _Deadline(time.monotonic() + self.timeout_s)
        try:
            return await self._call(self._conns.writer, self.write_sync, fn, deadline)
        except DatabaseUnavailable:
            deadline.abandoned.set()  # a write still under way rolls back
            raise

    async def read(self, fn: Callable[[Connection], T], *, quick: bool = False) -> T:
        """``fn(conn)`` on a reader thread; with ``quick``, first on this thread (see the module docstring)."""
        if quick:
            try:
                return self._conns.quick(fn, QUICK_READ_S)
            except Exception as exc:
                if type(exc).__name__ != "OperationalError":  # not SQLite's refusal: the same on any thread
                    raise
        return await self._call(self._conns.readers, lambda: fn(self._conns.reader_conn()))

    async def ping(self) -> None:
        """A read that must answer (within the timeout, when bounded); ``DatabaseUnavailable`` if not."""
        await self.read(lambda c: c.execute("SELECT 1").fetchone())

    async def _call(self, pool: ThreadPoolExecutor, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        if self.timeout_s is None:
            return await loop.run_in_executor(pool, fn, *args)
        try:
            async with asyncio.timeout(self.timeout_s):
                return await loop.run_in_executor(pool, fn, *args)
        except TimeoutError:
            raise DatabaseUnavailable(f"the SQLite database did not answer within {self.timeout_s:g} s") from None
        except Exception as exc:
            if _unavailable(exc):
                raise DatabaseUnavailable(f"the SQLite database is unavailable: {exc}") from exc
            raise

    def run_sync(self, fn: Callable[[Connection], T]) -> T:
        """On the writer thread, blocking (start-up and CLI use)."""
        return self._conns.writer.submit(self.write_sync, fn).result()

    def close(self) -> None:
        self._conns.writer.shutdown(wait=True)
        self._conns.readers.shutdown(wait=True)
        for conn in self._conns.all:
            with contextlib.suppress(Exception):
                conn.close()
        self._conns.all.clear()


class _Deadline:
    """When a bounded write's caller gives up, and whether it has."""

    def __init__(self, at: float) -> None:
        self.at = at  # time.monotonic()
        self.abandoned = threading.Event()

    def left(self) -> float:
        return 0.0 if self.abandoned.is_set() else self.at - time.monotonic()


def _transaction(conn: Connection, fn: Callable[[Connection], T], deadline: _Deadline | None = None) -> T:
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = fn(conn)
        if deadline is not None and deadline.abandoned.is_set():
            raise DatabaseUnavailable("the caller gave up before the write was committed")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return result


# SQLite's words for a database that cannot be used now (another process's lock held past the
# busy timeout, a disk that fails): sqlite3's and sqlean's OperationalError alike.
_UNAVAILABLE = ("locked", "busy", "disk i/o error", "unable to open")


def _unavailable(exc: Exception) -> bool:
    return type(exc).__name__ == "OperationalError" and any(w in str(exc).lower() for w in _UNAVAILABLE)
