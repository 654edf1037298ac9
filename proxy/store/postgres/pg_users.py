"""One user across every table on PostgreSQL: the same contract as ``sqlite_users.UserStore``.

Vectors are columns of their rows, so deleting a user's rows deletes their
vectors. Deleted rows stay in PostgreSQL's files until VACUUM reclaims the
space (autovacuum, within minutes on a busy table); the pages are not
readable through SQL meanwhile, and backups taken before keep the user
(docs/guide/deployment.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from psycopg.rows import dict_row

from .. import user_export as fmt
from .. import user_restore as plan
from ..forgetting import SIGHTINGS
from ..records import cursor_key
from .pg_coordination import bump_generation, lock_scope
from .pg_database import PgConnection, PgDatabase

_OWNED = fmt.OWNED
_WHO = 'tenant = %s AND "user" = %s'


class PgUserStore:
    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    async def export(self, tenant: str, user: str) -> dict[str, Any]:
        """Everything stored about the user, as JSON-ready data (format ``EXPORT_VERSION``)."""
        async with self.db.transaction() as conn:
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")  # one snapshot
            return await _export(conn, tenant, user)

    async def forget(self, tenant: str, user: str) -> dict[str, int]:
        """Delete every row of the user in one transaction. Returns counts per table."""
        async with self.db.transaction() as conn:
            counts = await _forget(conn, tenant, user)
        counts["wal_checkpointed"] = int(await self.checkpoint())
        return counts

    async def checkpoint(self) -> bool:
        """SQLite's WAL has no counterpart here: the delete is durable at commit."""
        return True

    async def restore(
        self,
        tenant: str,
        user: str,
        data: Mapping[str, Any],
        item_vectors: np.ndarray,
        fragment_vectors: np.ndarray,
    ) -> dict[str, int]:
        """Write an export (already validated) back for (tenant, user), with fresh vectors."""
        steps = plan.steps(user, data, item_vectors, fragment_vectors)
        async with self.db.transaction() as conn:
            return await plan.run_async(steps, lambda step: _restore_step(conn, tenant, user, step))

    async def session_activity(self, tenant: str, session: str) -> dict[str, Any] | None:
        """Who a session belongs to and how much of it is indexed; None when nothing names it."""
        async with self.db.connection() as conn:
            union = " UNION ".join(f'SELECT "user" FROM {t} WHERE tenant = %s AND session = %s' for t in _OWNED)
            users = [str(r[0]) for r in await _all(conn, union, (tenant, session) * len(_OWNED))]
            fragments = await _one(
                conn, "SELECT count(*) FROM fragments WHERE tenant = %s AND session = %s", (tenant, session)
            )
            cursor = await _cursor(conn, tenant, users, session)
        return fmt.activity(users, int(fragments or 0), cursor)


async def _all(conn: PgConnection, sql: str, args: Sequence[Any]) -> list[Any]:
    cur = await conn.execute(sql, tuple(args))
    return list(await cur.fetchall())


async def _one(conn: PgConnection, sql: str, args: Sequence[Any]) -> Any:
    cur = await conn.execute(sql, tuple(args))
    row = await cur.fetchone()
    return None if row is None else row[0]


async def _dicts(conn: PgConnection, sql: str, args: Sequence[Any]) -> list[dict[str, Any]]:
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(sql, tuple(args))
        return list(await cur.fetchall())


async def _export(conn: PgConnection, tenant: str, user: str) -> dict[str, Any]:
    async def rows(columns: str, table: str, order: str) -> list[dict[str, Any]]:
        return await _dicts(conn, f"SELECT {columns} FROM {table} WHERE {_WHO} ORDER BY {order}", (tenant, user))

    return fmt.document(
        tenant, user,
        items=await rows(fmt.ITEM_COLUMNS, "items", "id"),
        fragments=await rows(fmt.FRAGMENT_COLUMNS, "fragments", "id"),
        sessions=[await _session(conn, tenant, user, s) for s in await _sessions(conn, tenant, user)],
        traces=await rows(fmt.TRACE_COLUMNS, "traces", "created"),
        events=await rows(fmt.EVENT_COLUMNS, "item_events", "id"),
    )


async def _session(conn: PgConnection, tenant: str, user: str, session: str) -> dict[str, Any]:
    key = (tenant, user, session)
    prefixes = await _dicts(
        conn, f"SELECT {fmt.PREFIX_COLUMNS} FROM prefixes WHERE {_WHO} AND session = %s ORDER BY upto", key
    )
    summaries = await _dicts(
        conn, f"SELECT {fmt.SUMMARY_COLUMNS} FROM summaries WHERE {_WHO} AND session = %s"
        " ORDER BY start, level", key,
    )
    return fmt.session_part(session, await _cursor(conn, tenant, [user], session), summaries, prefixes)


async def _cursor(conn: PgConnection, tenant: str, users: Sequence[str], session: str) -> int | None:
    """How far ``session`` was mined: the furthest of ``users``' cursors of it."""
    found = await _one(
        conn, "SELECT max(upto) FROM extraction_cursors WHERE tenant = %s AND session = ANY(%s)",
        (tenant, [cursor_key(u, session) for u in users]),
    )
    return None if found is None else int(found)


async def _sessions(conn: PgConnection, tenant: str, user: str) -> list[str]:
    union = " UNION ".join(
        f"SELECT session FROM {table} WHERE {_WHO} AND session IS NOT NULL" for table in _OWNED
    )
    return [str(r[0]) for r in await _all(conn, f"{union} ORDER BY 1", (tenant, user) * len(_OWNED))]


async def _forget(conn: PgConnection, tenant: str, user: str) -> dict[str, int]:
    sessions = await _sessions(conn, tenant, user)
    vectors = 0
    for kind in ("fragments", "items"):
        vectors += int(await _one(
            conn, f"SELECT count(*) FROM {kind} WHERE {_WHO} AND embedding IS NOT NULL", (tenant, user)
        ))
    counts = {"vectors": vectors}
    for table in _OWNED:
        cur = await conn.execute(f"DELETE FROM {table} WHERE {_WHO}", (tenant, user))
        counts[table] = int(cur.rowcount)
    cur = await conn.execute(f"DELETE FROM forgotten_turns WHERE {_WHO}", (tenant, user))
    counts["forgotten_turns"] = int(cur.rowcount)
    await conn.execute(f"DELETE FROM {SIGHTINGS} WHERE {_WHO}", (tenant, user))
    cur = await conn.execute(
        "DELETE FROM extraction_cursors WHERE tenant = %s AND session = ANY(%s)",
        (tenant, [cursor_key(user, s) for s in sessions]),
    )
    counts["extraction_cursors"] = int(cur.rowcount)
    # Every replica's in-memory index of the user sees this on its next search and drops the rows.
    await bump_generation(conn, tenant, user)
    return counts


async def _restore_step(conn: PgConnection, tenant: str, user: str, step: plan.Step) -> Any:
    """One step of ``user_restore.steps`` in PostgreSQL."""
    match step:
        case plan.LockScope():
            await lock_scope(conn, tenant, user)
        case plan.Insert(table, columns, values, vector, new_id):
            if vector is not None:
                columns, values = f"{columns}, embedding", (*values, np.asarray(vector, dtype=np.float32))
            marks = ", ".join(["%s"] * (len(values) + 1))
            sql = f"INSERT INTO {table} (tenant, {columns}) VALUES ({marks}) ON CONFLICT DO NOTHING"
            if new_id:
                return int(await _one(conn, f"{sql} RETURNING id", (tenant, *values)) or 0)
            cur = await conn.execute(sql, (tenant, *values))
            return int(cur.rowcount)
        case plan.FindItem(key, content):
            found = await _one(
                conn, f"SELECT id FROM items WHERE {_WHO} AND key = %s AND content = %s", (tenant, user, key, content)
            )
            return None if found is None else int(found)
        case plan.Supersede(successor, item_id):
            await conn.execute(
                "UPDATE items SET superseded_by = %s WHERE id = %s AND superseded_by IS NULL", (successor, item_id)
            )
        case plan.History(item_id, events):
            await conn.execute("DELETE FROM item_events WHERE item = %s AND tenant = %s", (item_id, tenant))
            async with conn.cursor() as cur:
                await cur.executemany(
                    'INSERT INTO item_events (tenant, item, "user", event, at, "by", detail)'
                    " VALUES (%s, %s, %s, %s, %s, %s, %s)",
                    [(tenant, *e) for e in events],
                )
        case plan.Cursor(session, upto):
            await conn.execute(
                "INSERT INTO extraction_cursors (tenant, session, upto) VALUES (%s, %s, %s)"
                " ON CONFLICT (tenant, session)"
                " DO UPDATE SET upto = greatest(extraction_cursors.upto, excluded.upto)",
                (tenant, session, upto),
            )
    return None
