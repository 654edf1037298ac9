"""Forgetting part of a user's data on PostgreSQL: the contract of ``sqlite_forgetting.ForgetStore``.

Vectors are columns of their rows, so a row and its vector go together.
Each call is one transaction that bumps the scope's generation, which every
replica's in-memory index reads with its next search.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from ..forgetting import (
    CHAIN_TABLES,
    FORGOTTEN,
    SESSION_TABLES,
    SIGHTINGS,
    drawn_only_from,
    rehomed,
    trace_needles,
)
from ..records import Forgot
from .pg_coordination import bump_generation
from .pg_database import PgConnection, PgDatabase
from .pg_fragments import TURN, WHO, ids_of, rows_of, source_turns


class PgForgetStore:
    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    async def memory(
        self, tenant: str, user: str, item_id: int, *, purge: bool = False, turns: Sequence[str] = (),
        also: Sequence[int] = (),
    ) -> Forgot | None:
        """Delete the item and the user's items ``also`` (the same fact said again), and hide (``purge``:
        delete) the turns they came from — those they name and ``turns``; None: no such item."""
        async with self.db.transaction() as conn:
            found = await rows_of(conn, f"SELECT id, fragment_hashes, content FROM items WHERE {WHO} AND id = %s",
                                  (tenant, user, item_id))
            if not found:
                return None
            others = await rows_of(
                conn, f"SELECT id, fragment_hashes, content FROM items WHERE {WHO} AND id = ANY(%s)",
                (tenant, user, [i for i in also if i != item_id]))
            rows = [*found, *others]
            gone = [int(r["id"]) for r in rows]
            await conn.execute("DELETE FROM items WHERE id = ANY(%s)", (gone,))
            named = [h for r in rows for h in json.loads(r["fragment_hashes"])]
            said = await source_turns(conn, tenant, user, [*named, *turns])
            traces = 0
            if purge:
                traces = await _purge(conn, tenant, user, said, also=[r["content"] for r in rows])
                await _drop_chains(conn, tenant, said)
                await _items_after(conn, tenant, user, {t["hash"] for t in said}, delete_drawn=False)
            else:
                await conn.execute(
                    f"UPDATE fragments SET status = '{FORGOTTEN}' WHERE status = 'active' AND id = ANY(%s)",
                    (ids_of(said),),
                )
            await bump_generation(conn, tenant, user)
        return Forgot(tuple(gone), len(said), purge, traces)

    async def fragment(self, tenant: str, user: str, fragment_id: int) -> Forgot | None:
        """Delete one fragment and the memories drawn only from it; None: no such fragment."""
        async with self.db.transaction() as conn:
            found = await rows_of(conn, f"SELECT {TURN} FROM fragments WHERE {WHO} AND id = %s",
                                (tenant, user, fragment_id))
            if not found:
                return None
            traces = await _purge(conn, tenant, user, found)
            await _drop_chains(conn, tenant, found)
            deleted = await _items_after(conn, tenant, user, {found[0]["hash"]}, delete_drawn=True)
            await bump_generation(conn, tenant, user)
        return Forgot(tuple(deleted), 1, True, traces)

    async def session(self, tenant: str, session: str) -> dict[str, int]:
        """Delete the session's fragments, summaries, prefixes, traces and the memories drawn only
        from it, for every user of the tenant it holds. Returns counts per table (zeros: unknown)."""
        tables = ("fragments", "items", *SESSION_TABLES)
        named = " UNION ".join(f'SELECT "user" FROM {t} WHERE tenant = %s AND session = %s' for t in tables)
        counts = dict.fromkeys(("fragments", "items", "vectors", *SESSION_TABLES), 0)
        async with self.db.transaction() as conn:
            users = [str(r["user"]) for r in await rows_of(conn, named, (tenant, session) * len(tables))]
            for user in users:
                turns = await rows_of(conn, f"SELECT {TURN} FROM fragments WHERE {WHO} AND session = %s",
                                    (tenant, user, session))
                turns = await _rehome(conn, tenant, user, session, turns)
                counts["traces"] += await _purge(conn, tenant, user, turns)
                deleted = await _items_after(conn, tenant, user, {t["hash"] for t in turns}, session,
                                             delete_drawn=True)
                counts["fragments"] += len(turns)
                counts["items"] += len(deleted)
                counts["vectors"] += len(turns) + len(deleted)
                await bump_generation(conn, tenant, user)
            for table in SESSION_TABLES:
                cur = await conn.execute(f"DELETE FROM {table} WHERE tenant = %s AND session = %s", (tenant, session))
                counts[table] += max(int(cur.rowcount), 0)
        return counts


async def _rehome(
    conn: PgConnection, tenant: str, user: str, session: str, turns: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """``sqlite_forgetting._rehome``: the forgotten session's turns another session said too move there."""
    found = await rows_of(conn, f"SELECT hash, session, position FROM {SIGHTINGS} WHERE {WHO} AND hash = ANY(%s)",
                          (tenant, user, [t["hash"] for t in turns]))
    moves = rehomed(((int(t["id"]), t["hash"]) for t in turns),
                    [(r["hash"], r["session"], int(r["position"])) for r in found], session)
    for t in turns:
        if int(t["id"]) in moves:
            other, position = moves[int(t["id"])]
            await conn.execute("UPDATE fragments SET session = %s, position = %s WHERE id = %s",
                               (other, position, t["id"]))
            await conn.execute(f"DELETE FROM {SIGHTINGS} WHERE {WHO} AND hash = %s AND session = %s",
                               (tenant, user, t["hash"], other))
    await conn.execute(f"DELETE FROM {SIGHTINGS} WHERE {WHO} AND session = %s", (tenant, user, session))
    return [t for t in turns if int(t["id"]) not in moves]


async def _purge(
    conn: PgConnection, tenant: str, user: str, turns: Sequence[dict[str, Any]], also: Iterable[str] = ()
) -> int:
    """Delete ``turns`` and their sightings, keep their digests, delete the traces holding their text; returns
    how many traces went."""
    if turns:
        await conn.execute("DELETE FROM fragments WHERE id = ANY(%s)", (ids_of(turns),))
        await conn.execute(f"DELETE FROM {SIGHTINGS} WHERE {WHO} AND hash = ANY(%s)",
                           (tenant, user, [t["hash"] for t in turns]))
        async with conn.cursor() as cur:
            await cur.executemany(
                'INSERT INTO forgotten_turns (tenant, "user", session, hash) VALUES (%s, %s, %s, %s)'
                " ON CONFLICT DO NOTHING",
                [(tenant, user, t["session"], t["hash"]) for t in turns],
            )
    needles = trace_needles([*(t["text"] for t in turns), *also])
    if not needles:
        return 0
    cur = await conn.execute(
        f"DELETE FROM traces WHERE {WHO} AND EXISTS (SELECT 1 FROM unnest(%s::text[]) AS n"
        " WHERE strpos(data, n) > 0)",
        (tenant, user, needles),
    )
    return max(int(cur.rowcount), 0)


async def _drop_chains(conn: PgConnection, tenant: str, turns: Sequence[dict[str, Any]]) -> None:
    """``sqlite_forgetting._drop_chains``: the summary chains of the sessions ``turns`` were said in."""
    for session in sorted({t["session"] for t in turns}):
        for table in CHAIN_TABLES:
            await conn.execute(f"DELETE FROM {table} WHERE tenant = %s AND session = %s", (tenant, session))


async def _items_after(
    conn: PgConnection, tenant: str, user: str, gone: set[str], session: str | None = None, *, delete_drawn: bool
) -> list[int]:
    """``sqlite_forgetting._items_after``: the user's items after the turns ``gone``; returns the ids deleted."""
    rows = await rows_of(conn, f"SELECT id, session, fragment_hashes FROM items WHERE {WHO} ORDER BY id",
                       (tenant, user))
    items = [(int(r["id"]), r["session"], json.loads(r["fragment_hashes"])) for r in rows]
    deleted, kept = drawn_only_from(items, gone, session)
    if not delete_drawn:
        kept.update({i: [] for i in deleted})
        deleted = []
    if deleted:
        await conn.execute("DELETE FROM items WHERE id = ANY(%s)", (deleted,))
    if kept:
        async with conn.cursor() as cur:
            await cur.executemany("UPDATE items SET fragment_hashes = %s WHERE id = %s",
                                  [(json.dumps(h), i) for i, h in kept.items()])
    if session is not None:
        for item_id, item_session, hashes in items:
            if item_session == session and item_id not in deleted:
                first = await rows_of(conn, f"SELECT session FROM fragments WHERE {WHO} AND hash = ANY(%s)"
                                    " ORDER BY id LIMIT 1", (tenant, user, list(kept.get(item_id, hashes))))
                await conn.execute("UPDATE items SET session = %s WHERE id = %s",
                                   (first[0]["session"] if first else None, item_id))
    return deleted
