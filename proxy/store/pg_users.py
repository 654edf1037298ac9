"""One user across every table on PostgreSQL: the same contract as ``users.UserStore``.

Vectors are columns of their rows, so deleting a user's rows deletes their
vectors. Deleted rows stay in PostgreSQL's files until VACUUM reclaims the
space (autovacuum, within minutes on a busy table); the pages are not
readable through SQL meanwhile, and backups taken before keep the user
(docs/deployment.md).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from psycopg.rows import dict_row

from .coordination import bump_generation, lock_scope
from .postgres import PgConnection, PgDatabase
from .users import EXPORT_VERSION

_ITEM_COLUMNS = (
    "id, session, type, key, content, importance, confidence, source, expires_at, status,"
    " superseded_by, turns, fragment_hashes, seen_count, access_count, last_access, created, updated"
)
_FRAGMENT_COLUMNS = "id, session, hash, role, text, position, tokens, created, status"
_SUMMARY_COLUMNS = 'id, session, level, text, tokens, start, "end", created'
_PREFIX_COLUMNS = "session, chain_hash, upto, summary_ids, created"
_OWNED = ("fragments", "items", "summaries", "prefixes", "traces", "response_sessions")
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
        async with self.db.transaction() as conn:
            return await _restore(conn, tenant, user, data, item_vectors, fragment_vectors)

    async def session_activity(self, tenant: str, session: str) -> dict[str, Any] | None:
        """Who a session belongs to and how much of it is indexed; None when nothing names it."""
        async with self.db.connection() as conn:
            union = " UNION ".join(f'SELECT "user" FROM {t} WHERE tenant = %s AND session = %s' for t in _OWNED)
            users = sorted(str(r[0]) for r in await _all(conn, union, (tenant, session) * len(_OWNED)))
            fragments = await _one(
                conn, "SELECT count(*) FROM fragments WHERE tenant = %s AND session = %s", (tenant, session)
            )
            cursor = await _one(
                conn, "SELECT upto FROM extraction_cursors WHERE tenant = %s AND session = %s",
                (tenant, session),
            )
        if not users and cursor is None:
            return None
        return {
            "users": users,
            "fragments": int(fragments or 0),
            "extraction_cursor": None if cursor is None else int(cursor),
        }


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
    who = (tenant, user)
    items = await _dicts(conn, f"SELECT {_ITEM_COLUMNS} FROM items WHERE {_WHO} ORDER BY id", who)
    for item in items:
        item["turns"] = json.loads(item["turns"])
        item["fragment_hashes"] = json.loads(item["fragment_hashes"])
    traces = await _dicts(
        conn, f"SELECT id, session, created, data FROM traces WHERE {_WHO} ORDER BY created", who
    )
    return {
        "version": EXPORT_VERSION,
        "tenant": tenant,
        "user": user,
        "exported_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "items": items,
        "fragments": await _dicts(
            conn, f"SELECT {_FRAGMENT_COLUMNS} FROM fragments WHERE {_WHO} ORDER BY id", who
        ),
        "sessions": [await _session(conn, tenant, user, s) for s in await _sessions(conn, tenant, user)],
        "traces": [{**t, "data": json.loads(t["data"])} for t in traces],
    }


async def _session(conn: PgConnection, tenant: str, user: str, session: str) -> dict[str, Any]:
    key = (tenant, user, session)
    prefixes = await _dicts(
        conn, f"SELECT {_PREFIX_COLUMNS} FROM prefixes WHERE {_WHO} AND session = %s ORDER BY upto", key
    )
    for p in prefixes:
        p["summary_ids"] = json.loads(p["summary_ids"])
        del p["session"]
    summaries = await _dicts(
        conn, f"SELECT {_SUMMARY_COLUMNS} FROM summaries WHERE {_WHO} AND session = %s"
        " ORDER BY start, level", key,
    )
    for s in summaries:
        del s["session"]
    cursor = await _one(
        conn, "SELECT upto FROM extraction_cursors WHERE tenant = %s AND session = %s", (tenant, session)
    )
    return {
        "session": session,
        "extraction_cursor": None if cursor is None else int(cursor),
        "summaries": summaries,
        "prefixes": prefixes,
    }


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
    cur = await conn.execute(
        "DELETE FROM extraction_cursors WHERE tenant = %s AND session = ANY(%s)", (tenant, sessions)
    )
    counts["extraction_cursors"] = int(cur.rowcount)
    # Every replica's in-memory index of the user sees this on its next search and drops the rows.
    await bump_generation(conn, tenant, user)
    return counts


async def _restore(
    conn: PgConnection,
    tenant: str,
    user: str,
    data: Mapping[str, Any],
    item_vectors: np.ndarray,
    fragment_vectors: np.ndarray,
) -> dict[str, int]:
    counts = {
        "fragments": await _restore_fragments(conn, tenant, user, data["fragments"], fragment_vectors),
        "items": await _restore_items(conn, tenant, user, data["items"], item_vectors),
        "summaries": 0,
        "prefixes": 0,
        "traces": 0,
    }
    for session in data["sessions"]:
        summaries, prefixes = await _restore_session(conn, tenant, user, session)
        counts["summaries"] += summaries
        counts["prefixes"] += prefixes
    for trace in data["traces"]:
        cur = await conn.execute(
            'INSERT INTO traces (tenant, id, "user", session, created, data)'
            " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
            (tenant, trace["id"], user, trace["session"], trace["created"],
             json.dumps(trace["data"], ensure_ascii=False)),
        )
        counts["traces"] += int(cur.rowcount)
    return counts


async def _restore_fragments(
    conn: PgConnection, tenant: str, user: str, fragments: Sequence[Mapping[str, Any]], vectors: np.ndarray
) -> int:
    added = 0
    await lock_scope(conn, tenant, user)
    for f, vec in zip(fragments, vectors, strict=True):
        cur = await conn.execute(
            'INSERT INTO fragments (tenant, "user", session, hash, role, text, terms, position,'
            " tokens, created, status, embedding) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
            " ON CONFLICT DO NOTHING",
            (tenant, user, f["session"], f["hash"], f["role"], f["text"], f["terms"],
             f["position"], f["tokens"], f["created"], f["status"], np.asarray(vec, dtype=np.float32)),
        )
        added += int(cur.rowcount)
    return added


async def _restore_items(
    conn: PgConnection, tenant: str, user: str, items: Sequence[Mapping[str, Any]], vectors: np.ndarray
) -> int:
    new_ids: dict[int, int] = {}
    added = 0
    for item, vec in zip(items, vectors, strict=True):
        found = await _one(
            conn, f"SELECT id FROM items WHERE {_WHO} AND key = %s AND content = %s",
            (tenant, user, item["key"], item["content"]),
        )
        if found is not None:
            new_ids[item["id"]] = int(found)
            continue
        new_ids[item["id"]] = int(await _one(
            conn,
            'INSERT INTO items (tenant, "user", session, type, key, content, terms, importance,'
            " confidence, source, expires_at, expires, status, turns, fragment_hashes, seen_count,"
            " access_count, last_access, created, updated, embedding) VALUES (%s, %s, %s, %s, %s,"
            " %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
            (tenant, user, item["session"], item["type"], item["key"], item["content"],
             item["terms"], item["importance"], item["confidence"],
             item["source"], item["expires_at"], item["expires"], item["status"], json.dumps(item["turns"]),
             json.dumps(item["fragment_hashes"]), item["seen_count"], item["access_count"],
             item["last_access"], item["created"], item["updated"], np.asarray(vec, dtype=np.float32)),
        ))
        added += 1
    # Superseded history keeps pointing at its successor, under the new ids.
    for item in items:
        successor = new_ids.get(item["superseded_by"]) if item["superseded_by"] is not None else None
        if successor is not None:
            await conn.execute(
                "UPDATE items SET superseded_by = %s WHERE id = %s AND superseded_by IS NULL",
                (successor, new_ids[item["id"]]),
            )
    return added


async def _restore_session(
    conn: PgConnection, tenant: str, user: str, session: Mapping[str, Any]
) -> tuple[int, int]:
    name = session["session"]
    summaries = prefixes = 0
    for s in session["summaries"]:
        cur = await conn.execute(
            'INSERT INTO summaries (tenant, id, "user", session, level, text, tokens, start, "end",'
            " created) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
            (tenant, s["id"], user, name, s["level"], s["text"], s["tokens"], s["start"], s["end"],
             s["created"]),
        )
        summaries += int(cur.rowcount)
    for p in session["prefixes"]:
        cur = await conn.execute(
            'INSERT INTO prefixes (tenant, session, "user", chain_hash, upto, summary_ids, created)'
            " VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
            (tenant, name, user, p["chain_hash"], p["upto"], json.dumps(p["summary_ids"]), p["created"]),
        )
        prefixes += int(cur.rowcount)
    if session["extraction_cursor"] is not None:
        await conn.execute(
            "INSERT INTO extraction_cursors (tenant, session, upto) VALUES (%s, %s, %s)"
            " ON CONFLICT (tenant, session)"
            " DO UPDATE SET upto = greatest(extraction_cursors.upto, excluded.upto)",
            (tenant, name, session["extraction_cursor"]),
        )
    return summaries, prefixes
