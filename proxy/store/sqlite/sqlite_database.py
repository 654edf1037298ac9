"""SQLite access: one writer thread, a pool of reader threads, sqlite-vec loaded on every connection.

Datasette's pattern: all writes go through a single writer connection
(SQLite allows one writer; serialising them in-process avoids ``database is
locked`` storms), reads run in parallel on their own connections under WAL.
Each ``write`` call is one explicit transaction. Every call runs on one of
these threads, never on the event loop: sqlite3 releases the GIL while
SQLite works, so the loop serves meanwhile.

Extension loading: the stdlib ``sqlite3`` where it was built with
``enable_load_extension``, else ``sqlean`` (a drop-in with extensions on all
platforms).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
Connection = Any  # sqlite3.Connection or sqlean's equivalent: same API
BUSY_TIMEOUT_MS = 30_000  # how long a call waits for another process's write lock


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


class Database:
    """Async façade: ``await db.write(fn)`` runs ``fn(conn)`` in a transaction on the writer thread."""

    def __init__(self, path: str, *, readers: int = 4) -> None:
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="paperclip-db-writer")
        self._readers = ThreadPoolExecutor(readers, thread_name_prefix="paperclip-db-reader")
        self._local = threading.local()
        self._write_conn: Connection | None = None
        self._all: list[Connection] = []
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()  # the writer connection: one transaction at a time

    def _writer_conn(self) -> Connection:
        if self._write_conn is None:
            self._write_conn = connect(self.path)
            self._all.append(self._write_conn)
        return self._write_conn

    def _reader_conn(self) -> Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect(self.path, readonly=True)
            self._local.conn = conn
            with self._lock:
                self._all.append(conn)
        return conn

    def write_sync(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn`` in one transaction on the writer connection, from the calling thread."""
        with self._write_lock:
            return self._transaction(fn)

    def _transaction(self, fn: Callable[[Connection], T]) -> T:
        conn = self._writer_conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            result = fn(conn)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return result

    async def write(self, fn: Callable[[Connection], T]) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._writer, self.write_sync, fn)

    async def read(self, fn: Callable[[Connection], T]) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._readers, lambda: fn(self._reader_conn()))

    def run_sync(self, fn: Callable[[Connection], T]) -> T:
        """On the writer thread, blocking (start-up and CLI use)."""
        return self._writer.submit(self.write_sync, fn).result()

    def close(self) -> None:
        self._writer.shutdown(wait=True)
        self._readers.shutdown(wait=True)
        for conn in self._all:
            with contextlib.suppress(Exception):
                conn.close()
        self._all.clear()
