"""PostgreSQL access for several replicas on one database: a psycopg 3 async pool, pgvector types.

``await PgDatabase.open(url, dim)`` first migrates on a connection of its
own, under an advisory lock so that replicas starting together migrate
once (``pg_schema.migrate``), then opens the pool. Every pooled connection
maps pgvector's ``vector`` type to numpy float32 arrays, in pgvector's
binary form both ways (a 384-float vector as text is ~4 KB to format and
parse; as binary it is one memory copy).

``async with db.transaction() as conn`` is one transaction; reads use
``db.connection()`` (autocommit, one statement each). Unlike SQLite's
single writer, writes from many replicas run side by side: rules that must
hold across replicas (one compression per range, one cleanup per period)
are rows locked or leased in the database (``pg_coordination.py``), never a
lock in one process.

``bounded(timeout_s)`` is the same pool whose calls give up after
``timeout_s`` — waiting for a connection, or for the database's answer —
with ``DatabaseUnavailable``, as do calls on a connection the database
dropped. A dropped or refused connection means the database is gone: from
then on every bounded call gives up at once (``Reachability``), rather than
each waiting ``timeout_s`` for a connection the pool cannot make — so
requests that queued behind the first ones do not wait a timeout each —
until ``ping`` finds the database answering again. A call that took too long
has its connection cut at the bound rather than its statement cancelled,
which on a server stopped where it was would hold the call up to 10 s more
(``_Deadline``); the database is then taken for gone too, and pinged at once
on a fresh connection: one that was only slow is used again within that
ping, one stopped where it was stays gone, so the calls queued behind the
cut one do not each wait their bound. ``ping`` tells whether the database
answers now. A database that stopped and came back is used again without a
restart: the pool's idle connections that died with it are replaced at once
once ``ping`` finds it back (``check``), and the pool's own reconnection
never waits longer than ``RECONNECT_TIMEOUT_S`` between attempts.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import numpy as np

from ..interface import DatabaseUnavailable
from . import pg_migrations as pg_schema

PgConnection = Any  # psycopg.AsyncConnection[Any]: the driver is an optional extra

# Per replica: the request handlers and background work share these. A
# replica's queries are short, so a few connections serve many requests;
# PostgreSQL's max_connections must cover replicas × max_size (docs/guide/deployment.md).
POOL_MIN = 2
POOL_MAX = 10
# The pool retries a connection that failed with a growing delay (1, 2, 4... s) until this,
# then gives it up and connects again on demand: a database back after a long outage is not
# waited for longer than this.
RECONNECT_TIMEOUT_S = 10.0
PING_TIMEOUT_S = 1.0
# After a bounded call's connection is cut, how long a wait not on its socket may still take.
SEVER_GRACE_S = 1.0


class Reachability:
    """Whether the database was found gone (a connection dropped or refused, or a call late), shared by a
    pool's views; and the recheck a late call starts."""

    def __init__(self) -> None:
        self.gone: str | None = None  # why, until a ping finds it answering
        self.recheck: asyncio.Task[None] | None = None  # a ping a late call started, while it runs


class _Deadline:
    """When a bounded call gives up, and how: its connection is cut (``sever``) rather than its task
    cancelled. On cancellation the driver asks the server to cancel the statement and waits for that,
    up to 10 s on a server that is stopped where it was (SIGSTOP: its sockets open, nothing answering);
    a cut socket ends every wait on it at once. The server rolls back what the cut connection had not
    committed, and the pool replaces the connection."""

    def __init__(self, at: float) -> None:
        self.at = at  # on the event loop's clock
        self.severed = False

    def sever(self, conn: PgConnection) -> None:
        self.severed = True
        # A connection closed or broken already has no socket to cut (OSError, or the driver's own error):
        # a callback of the loop must not raise.
        with contextlib.suppress(Exception):
            cut = socket.socket(fileno=os.dup(conn.pgconn.socket))
            try:
                cut.shutdown(socket.SHUT_RDWR)
            finally:
                cut.close()  # the duplicate only: the driver closes its own


class PgDatabase:
    def __init__(self, pool: Any, dim: int | None, url: str = "", reach: Reachability | None = None) -> None:
        self.pool = pool
        self.dim = dim
        self.url = url
        self.timeout_s: float | None = None
        self.reach = reach or Reachability()

    def bounded(self, timeout_s: float) -> PgDatabase:
        view = PgDatabase(self.pool, self.dim, self.url, self.reach)
        view.timeout_s = timeout_s
        return view

    @classmethod
    async def open(
        cls, url: str, dim: int | None, *, min_size: int = POOL_MIN, max_size: int = POOL_MAX
    ) -> PgDatabase:
        """Migrate (once across replicas), then open a pool whose connections speak pgvector.

        ``dim`` None leaves the vector columns as they are (a reader that embeds nothing).
        """
        import psycopg
        from psycopg.types import TypeInfo
        from psycopg_pool import AsyncConnectionPool

        try:
            first = await psycopg.AsyncConnection.connect(url, autocommit=True)
        except psycopg.OperationalError as exc:  # not reached, refused, no such database: said in one line
            raise DatabaseUnavailable(f"cannot connect to PostgreSQL: {' '.join(str(exc).split())}") from exc
        async with first as conn:
            await pg_schema.migrate(conn, dim)
            info = await TypeInfo.fetch(conn, "vector")
        if info is None:
            raise RuntimeError("the pgvector extension is not installed in this database")
        dumper, loader = _vector_adapters(info.oid)

        async def configure(conn: PgConnection) -> None:
            conn.adapters.register_dumper(np.ndarray, dumper)
            conn.adapters.register_loader(info.oid, loader)
            _register_text_loader(conn.adapters, info.oid)

        pool = AsyncConnectionPool(
            url, min_size=min_size, max_size=max_size, open=False, reconnect_timeout=RECONNECT_TIMEOUT_S,
            kwargs={"autocommit": True}, configure=configure, name="paperclip",
        )
        await pool.open(wait=True, timeout=30)
        return cls(pool, dim, url)

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[PgConnection]:
        """A pooled connection in autocommit: each statement is its own transaction."""
        if self.timeout_s is None:
            async with self.pool.connection() as conn:
                yield conn
            return
        if self.reach.gone is not None:
            raise DatabaseUnavailable(self.reach.gone)
        loop = asyncio.get_running_loop()
        deadline = _Deadline(loop.time() + self.timeout_s)
        async with self._bounded(deadline), self.pool.connection(timeout=self.timeout_s) as conn:
            cut = loop.call_at(deadline.at, deadline.sever, conn)
            try:
                yield conn
            finally:
                cut.cancel()

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[PgConnection]:
        """A pooled connection inside one transaction: committed on exit, rolled back on error."""
        async with self.connection() as conn, conn.transaction():
            yield conn

    @asynccontextmanager
    async def _bounded(self, deadline: _Deadline) -> AsyncIterator[None]:
        """The call inside gives up at ``deadline`` (its connection severed, ``_Deadline``); a database gone
        is ``DatabaseUnavailable``."""
        from psycopg_pool import PoolTimeout

        assert self.timeout_s is not None
        late = f"PostgreSQL did not answer within {self.timeout_s:g} s"
        try:
            # Past the cut, only a wait that is not on the connection's socket is left to interrupt.
            async with asyncio.timeout_at(deadline.at + SEVER_GRACE_S):
                yield
        except (TimeoutError, PoolTimeout) as exc:
            self._late(late)
            raise DatabaseUnavailable(late) from exc
        except Exception as exc:
            if not _unavailable(exc):  # the statement's own failure, or ours: not the database's
                raise
            if deadline.severed:  # our own cut, not the database's: late, for all we know not gone
                self._late(late)
                raise DatabaseUnavailable(late) from exc
            why = f"PostgreSQL is unavailable: {exc}"
            if _gone(exc):
                self.reach.gone = why
            raise DatabaseUnavailable(why) from exc

    def _late(self, why: str) -> None:
        """A call gave up at its bound: taken for gone until a fresh connection answers, and that is tried
        at once. The calls queued behind it (four requests prepare at once) give up at once meanwhile,
        not each at its bound; a database that was only slow answers the recheck within milliseconds."""
        if self.reach.gone is None:
            self.reach.gone = why
        if self.reach.recheck is None:
            self.reach.recheck = asyncio.get_running_loop().create_task(self._recheck())

    async def _recheck(self) -> None:
        try:
            # Whatever it finds (still gone, or a pool closing with the server): /readyz's watcher pings
            # every second, and no error of a task nobody awaits may go unread.
            with contextlib.suppress(Exception):
                await self.ping()
        finally:
            self.reach.recheck = None

    async def ping(self) -> None:
        """``DatabaseUnavailable`` unless the database answers now, through the pool or a connection of its own;
        a database that answers neither is taken for gone (``Reachability``) until a ping finds it.

        The pool's connections may have died with an earlier outage while the
        database is back: then a fresh connection decides, and the pool is
        checked (its dead connections replaced at once, not on its backoff).
        """
        import psycopg

        if self.reach.gone is None:
            try:
                async with self.bounded(PING_TIMEOUT_S).connection() as conn:
                    await conn.execute("SELECT 1")
                return
            except DatabaseUnavailable:
                pass
        try:
            async with asyncio.timeout(PING_TIMEOUT_S):
                conn = await psycopg.AsyncConnection.connect(self.url, autocommit=True)
                async with conn:
                    await conn.execute("SELECT 1")
        except Exception as exc:
            # Gone until a ping finds it: calls queued behind the first ones give up at once, not each at its bound.
            self.reach.gone = f"PostgreSQL is unavailable: {exc or type(exc).__name__}"
            raise DatabaseUnavailable(self.reach.gone) from exc
        await self.pool.check()
        self.reach.gone = None

    async def close(self) -> None:
        if self.reach.recheck is not None:
            self.reach.recheck.cancel()
        await self.pool.close()


async def nearest(
    db: PgDatabase, table: str, tenant: str, user: str, vector: Any, k: int
) -> list[tuple[int, float]]:
    """(row id, cosine similarity) of the user's ``k`` nearest rows of ``table``, nearest first.

    On a table with an HNSW index (``pg_vectors.HNSW_TABLES``) the index
    answers first. pgvector 0.6 filters its candidates after the index
    scan, so when other users' rows crowd the ``ef_search`` list the answer
    comes back short: then the user's rows are ranked exactly (the ``+ 0``
    hides the ordering from the index, the (tenant, user) index finds the
    rows). On a table without one, the first query is already exact.
    """
    where = f'FROM {table} WHERE tenant = %s AND "user" = %s AND embedding IS NOT NULL'
    async with db.transaction() as conn:
        await conn.execute("SELECT set_config('hnsw.ef_search', %s, true)", (str(max(40, 2 * k)),))
        cur = await conn.execute(
            f"SELECT id, embedding <=> %s AS d {where} ORDER BY embedding <=> %s LIMIT %s",
            (vector, tenant, user, vector, k),
        )
        rows = await cur.fetchall()
        if len(rows) < k:
            cur = await conn.execute(
                f"SELECT id, embedding <=> %s AS d {where} ORDER BY (embedding <=> %s) + 0 LIMIT %s",
                (vector, tenant, user, vector, k),
            )
            rows = await cur.fetchall()
    return [(int(r[0]), 1.0 - float(r[1])) for r in rows]


def _unavailable(exc: Exception) -> bool:
    """A failure of the database or the way to it, not of the statement: a dropped or refused
    connection, a server shutting down or starting up, a statement cancelled for taking too long."""
    import psycopg

    if isinstance(exc, psycopg.InterfaceError):
        return True
    if isinstance(exc, psycopg.errors.TransactionRollback):  # a deadlock or a serialization failure
        return False
    return isinstance(exc, psycopg.OperationalError)


# What a server says as it goes: shutting down (by an operator, after a crash) or not accepting
# connections yet. Class 08 is a failed or refused connection.
_GOING = frozenset({"57P01", "57P02", "57P03"})


def _gone(exc: Exception) -> bool:
    """Of the ``_unavailable`` failures, those that mean the database itself is gone, not that one
    statement failed: a connection dropped or refused (no SQLSTATE: the client lost it), a server
    shutting down or starting up. A statement cancelled for taking too long is not one of them."""
    import psycopg

    if isinstance(exc, psycopg.InterfaceError):
        return True
    state = getattr(exc, "sqlstate", None)
    return isinstance(exc, psycopg.OperationalError) and (state is None or state.startswith("08") or state in _GOING)


def _vector_adapters(oid: int) -> tuple[type, type]:
    """psycopg adapters between numpy float32 arrays and pgvector's binary ``vector``.

    The wire form is pgvector's: a big-endian uint16 dimension, a uint16 0,
    then big-endian float32s.
    """
    from psycopg.adapt import Dumper, Loader
    from psycopg.pq import Format

    class VectorDumper(Dumper):
        format = Format.BINARY

        def dump(self, obj: Any) -> bytes:
            vec = np.asarray(obj, dtype=">f4").ravel()
            return struct.pack(">HH", vec.shape[0], 0) + vec.tobytes()

    VectorDumper.oid = oid

    class VectorLoader(Loader):
        format = Format.BINARY

        def load(self, data: Any) -> np.ndarray:
            return np.frombuffer(data, dtype=">f4", offset=4).astype(np.float32)

    return VectorDumper, VectorLoader


def _register_text_loader(adapters: Any, oid: int) -> None:
    """Text results (a cursor not asked for binary) still come back as arrays."""
    from psycopg.adapt import Loader

    class VectorTextLoader(Loader):
        def load(self, data: Any) -> np.ndarray:
            return np.array(bytes(data)[1:-1].split(b","), dtype=np.float32)

    adapters.register_loader(oid, VectorTextLoader)
