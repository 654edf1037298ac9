"""Fragments on PostgreSQL: the same contract as ``sqlite_fragments.FragmentStore``.

The vector is a column of the fragment's row (``embedding vector(dim)``),
so a fragment and its vector are written and deleted together. The scope's
generation is read in the same transaction as the rows it describes.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from psycopg.rows import dict_row

from ..forgetting import replies_to
from ..records import Fragment, Loaded, NewFragment, generation_key
from .pg_coordination import GENERATION, bump_generation, scope_lock_key
from .pg_database import PgConnection, PgDatabase, nearest


class PgFragmentStore:
    def __init__(self, db: PgDatabase) -> None:
        self.db = db
        # A scope's writes queue here before taking a pooled connection: waiting on the scope's
        # database lock (``lock_scope``) with one would starve the request path of connections.
        self._writers: weakref.WeakValueDictionary[tuple[str, str], asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )

    async def known(self, tenant: str, user: str, hashes: Sequence[str], session: str | None = None) -> set[str]:
        """Which of ``hashes`` the user's fragments hold, or ``session`` held before they were purged."""
        if not hashes:
            return set()
        async with self.db.connection() as conn:
            cur = await conn.execute(
                'SELECT hash FROM fragments WHERE tenant = %s AND "user" = %s AND hash = ANY(%s)'
                ' UNION SELECT hash FROM forgotten_turns WHERE tenant = %s AND "user" = %s AND session = %s'
                " AND hash = ANY(%s)",
                (tenant, user, list(hashes), tenant, user, session, list(hashes)),
            )
            return {r[0] for r in await cur.fetchall()}

    async def add(
        self,
        tenant: str,
        user: str,
        session: str,
        fragments: Sequence[NewFragment],
        vectors: np.ndarray,
        created: float | None = None,
    ) -> int:
        """Insert fragments not yet known, with their vectors; returns how many were new."""
        if not fragments:
            return 0
        now = time.time() if created is None else created
        rows = [
            (f.hash, f.role, f.text, f.terms, f.position, f.tokens, np.asarray(vec, dtype=np.float32))
            for f, vec in zip(fragments, vectors, strict=True)
        ]
        # One statement, so one message to the server: the scope's lock is held while the
        # database inserts, never while this process (maybe starved of CPU) sends the rest of a
        # transaction. A statement in autocommit is its own transaction: the lock ends with it.
        writer = self._writers.setdefault((tenant, user), asyncio.Lock())
        async with writer, self.db.connection() as conn:
            cur = await conn.execute(_insert_locked(len(rows)), (
                scope_lock_key(tenant, user), tenant, user, session, now,
                *(value for row in rows for value in row),
            ))
            added = max(int(cur.rowcount), 0)
            if added < len(rows):  # some said before in another session: this one said them too (SIGHTINGS)
                await conn.execute(
                    'INSERT INTO fragment_sightings (tenant, "user", hash, session, position)'
                    " SELECT %s, %s, v.h, %s, v.p FROM unnest(%s::text[], %s::integer[]) AS v (h, p)"
                    " WHERE EXISTS (SELECT 1 FROM fragments f WHERE f.tenant = %s AND f.\"user\" = %s"
                    " AND f.hash = v.h AND f.session != %s) ON CONFLICT DO NOTHING",
                    (tenant, user, session, [f.hash for f in fragments], [f.position for f in fragments],
                     tenant, user, session),
                )
            return added

    async def knn(self, tenant: str, user: str, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        """(fragment id, cosine similarity), nearest first."""
        return await nearest(self.db, "fragments", tenant, user, vector, k)

    async def sources(self, tenant: str, user: str, ids: Sequence[int]) -> dict[int, tuple[str, str, str]]:
        """(hash, session, role) of the user's active fragments ``ids``."""
        if not ids:
            return {}
        async with self.db.connection() as conn:
            cur = await conn.execute(
                'SELECT id, hash, session, role FROM fragments WHERE tenant = %s AND "user" = %s'
                " AND status = 'active' AND id = ANY(%s)",
                (tenant, user, list(ids)),
            )
            return {int(r[0]): (str(r[1]), str(r[2]), str(r[3])) for r in await cur.fetchall()}

    async def suppress(self, tenant: str, user: str, hashes: Sequence[str]) -> None:
        async with self.db.transaction() as conn:
            await suppress(conn, tenant, user, hashes)

    async def replies(self, tenant: str, user: str, hashes: Sequence[str]) -> list[tuple[str, str]]:
        """(hash, text) of the assistant's active replies right after the user's turns with ``hashes``
        (``forgetting.replies_to``)."""
        if not hashes:
            return []
        async with self.db.connection() as conn:
            turns = await source_turns(conn, tenant, user, hashes)
        said = set(hashes)
        return [(str(t["hash"]), str(t["text"])) for t in turns if t["hash"] not in said and t["status"] == "active"]

    async def load_since(
        self, tenant: str, user: str, after_id: int, limit: int
    ) -> tuple[int, list[Loaded]]:
        """The scope's generation, and its active fragments with id > ``after_id``, by id, at most ``limit``."""
        # Both queries in one round trip (this runs before every search); the generation is read
        # first, so rows hidden after it was read only make the next search reload once more.
        async with self.db.connection() as conn, conn.pipeline(), conn.cursor(binary=True) as cur:
            scope = await conn.execute(GENERATION, (generation_key(tenant, user),))
            await cur.execute(
                "SELECT id, session, hash, role, text, position, tokens, created, terms, embedding"
                ' FROM fragments WHERE tenant = %s AND "user" = %s AND id > %s AND status = %s'
                " AND embedding IS NOT NULL ORDER BY id LIMIT %s",
                (tenant, user, after_id, "active", limit),
            )
            found = await scope.fetchone()
            rows = await cur.fetchall()
        gen = 0 if found is None else int(found[0])
        sessions: dict[str, str] = {}  # one string object per session, not per row
        return gen, [
            Loaded(
                Fragment(int(r[0]), sessions.setdefault(r[1], r[1]), r[2], r[3], r[4], int(r[5]),
                         int(r[6]), float(r[7])),
                str(r[8]),
                r[9],
            )
            for r in rows
        ]

    async def active_ids(self, tenant: str, user: str) -> set[int]:
        async with self.db.connection() as conn:
            cur = await conn.execute(
                'SELECT id FROM fragments WHERE tenant = %s AND "user" = %s AND status = %s',
                (tenant, user, "active"),
            )
            return {int(r[0]) for r in await cur.fetchall()}

    async def count(self, tenant: str, user: str) -> int:
        async with self.db.connection() as conn:
            cur = await conn.execute(
                'SELECT count(*) FROM fragments WHERE tenant = %s AND "user" = %s', (tenant, user)
            )
            row = await cur.fetchone()
            return int(row[0])


def _insert_locked(n: int) -> str:
    """INSERT of ``n`` fragments of one scope after taking the scope's lock (``lock_scope``).

    The lock is a column of the one-row subquery every inserted row is joined
    with, so it is taken before the first row (and its id) is made.
    """
    values = ", ".join(["(%s, %s, %s, %s, %s::integer, %s::integer, %s)"] * n)
    return (
        'INSERT INTO fragments (tenant, "user", session, hash, role, text, terms, position, tokens,'
        " created, embedding)"
        " SELECT s.t, s.u, s.s, v.h, v.r, v.tx, v.te, v.p, v.n, s.c, v.e"
        " FROM (SELECT pg_advisory_xact_lock(hashtextextended(%s, 0)) AS l, %s::text AS t, %s::text AS u,"
        " %s::text AS s, %s::double precision AS c) AS s,"
        f" (VALUES {values}) AS v (h, r, tx, te, p, n, e)"
        " ON CONFLICT DO NOTHING"
    )


async def suppress(conn: PgConnection, tenant: str, user: str, hashes: Sequence[str]) -> None:
    """Mark fragments as never to be injected again (their fact was superseded), in ``conn``'s transaction."""
    if not hashes:
        return
    await conn.execute(
        f"UPDATE fragments SET status = 'superseded' WHERE {WHO} AND hash = ANY(%s)", (tenant, user, list(hashes)))
    await bump_generation(conn, tenant, user)


TURN = "id, session, hash, position, role, text, status"  # the columns ``source_turns`` reads
WHO = 'tenant = %s AND "user" = %s'  # one user's rows


async def rows_of(conn: PgConnection, sql: str, args: Sequence[Any]) -> list[dict[str, Any]]:
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(sql, tuple(args))
        return list(await cur.fetchall())


async def source_turns(conn: PgConnection, tenant: str, user: str, hashes: Sequence[str]) -> list[dict[str, Any]]:
    """The user's fragments with ``hashes``, and the assistant's reply right after each user turn."""
    if not hashes:
        return []
    turns = await rows_of(conn, f"SELECT {TURN} FROM fragments WHERE {WHO} AND hash = ANY(%s)",
                        (tenant, user, list(hashes)))
    after: dict[tuple[str, int], tuple[int, str]] = {}
    for t in turns:
        nxt = await rows_of(
            conn, 'SELECT id, role FROM fragments WHERE tenant = %s AND session = %s AND position = %s AND "user" = %s',
            (tenant, t["session"], t["position"] + 1, user),
        )
        if nxt:
            after[(t["session"], t["position"] + 1)] = (int(nxt[0]["id"]), str(nxt[0]["role"]))
    seen = set(ids_of(turns))
    replies = [i for i in replies_to(((t["session"], t["position"], t["role"]) for t in turns), after)
               if i not in seen]
    if replies:
        turns += await rows_of(conn, f"SELECT {TURN} FROM fragments WHERE {WHO} AND id = ANY(%s)",
                             (tenant, user, replies))
    return turns


def ids_of(rows: Iterable[dict[str, Any]]) -> list[int]:
    return [int(r["id"]) for r in rows]
