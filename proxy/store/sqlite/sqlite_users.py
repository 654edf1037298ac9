"""One user across every table: export, forget, restore.

A user's data is every row with their (tenant, user): items, fragments,
summaries, prefixes, traces, the vectors of their items and fragments, and
the extraction cursors of their sessions (a session is theirs when any of
those rows names it).

Forgetting relies on ``secure_delete`` (on for the writer connection, so
deleted cells are zeroed in place) and a ``wal_checkpoint(TRUNCATE)`` after
the delete, so the old page images that still hold the text leave the WAL.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .. import user_export as fmt
from .. import user_restore as plan
from ..forgetting import SIGHTINGS
from ..records import cursor_key, scope_of
from ..user_export import EXPORT_VERSION as EXPORT_VERSION
from .sqlite_database import Connection, Database
from .sqlite_fragments import bump_generation, rows_in

_OWNED = fmt.OWNED


class UserStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def export(self, tenant: str, user: str) -> dict[str, Any]:
        """Everything stored about the user, as JSON-ready data (format ``EXPORT_VERSION``)."""
        return await self.db.read(lambda c: _export(c, tenant, user))

    async def forget(self, tenant: str, user: str) -> dict[str, int]:
        """Delete every row of the user, then checkpoint the WAL away. Returns counts per table."""
        counts = await self.db.write(lambda c: _forget(c, tenant, user))
        counts["wal_checkpointed"] = int(await self.checkpoint())
        return counts

    async def checkpoint(self) -> bool:
        """Copy the WAL into the database file and truncate it; False when a reader kept it busy.

        Runs on a reader connection: a checkpoint cannot run inside the
        writer's transaction, and any connection may checkpoint.
        """
        row = await self.db.read(lambda c: c.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone())
        return row is None or int(row[0]) == 0

    async def restore(
        self,
        tenant: str,
        user: str,
        data: Mapping[str, Any],
        item_vectors: np.ndarray,
        fragment_vectors: np.ndarray,
    ) -> dict[str, int]:
        """Write an export (already validated) back for (tenant, user), with fresh vectors.

        The caller computes what the store cannot: each fragment's and item's
        BM25 ``terms`` and each item's ``expires`` (epoch seconds or None).
        Rows already present (same fragment hash, same item key and content,
        same summary id) are skipped, so importing twice adds nothing.
        """
        steps = plan.steps(user, data, item_vectors, fragment_vectors)
        return await self.db.write(lambda c: plan.run(steps, lambda step: _restore_step(c, tenant, user, step)))

    async def session_activity(self, tenant: str, session: str) -> dict[str, Any] | None:
        """Who a session belongs to and how much of it is indexed; None when nothing names it."""
        return await self.db.read(lambda c: _activity(c, tenant, session))


# ---------------------------------------------------------------- export


def _export(c: Connection, tenant: str, user: str) -> dict[str, Any]:
    who = (tenant, user)

    def rows(columns: str, table: str, order: str) -> list[dict[str, Any]]:
        return _rows(c, f"SELECT {columns} FROM {table} WHERE tenant = ? AND user = ? ORDER BY {order}", who)

    return fmt.document(
        tenant, user,
        items=rows(fmt.ITEM_COLUMNS, "items", "id"),
        fragments=rows(fmt.FRAGMENT_COLUMNS, "fragments", "id"),
        sessions=[_session(c, tenant, user, s) for s in _sessions(c, tenant, user)],
        traces=rows(fmt.TRACE_COLUMNS, "traces", "created"),
        events=rows(fmt.EVENT_COLUMNS, "item_events", "id"),
    )


def _session(c: Connection, tenant: str, user: str, session: str) -> dict[str, Any]:
    key = (tenant, user, session)
    prefixes = _rows(
        c, f"SELECT {fmt.PREFIX_COLUMNS} FROM prefixes WHERE tenant = ? AND user = ? AND session = ?"
        " ORDER BY upto", key,
    )
    summaries = _rows(
        c, f"SELECT {fmt.SUMMARY_COLUMNS} FROM summaries WHERE tenant = ? AND user = ? AND session = ?"
        " ORDER BY start, level", key,
    )
    return fmt.session_part(session, _cursor(c, tenant, [user], session), summaries, prefixes)


def _cursor(c: Connection, tenant: str, users: Sequence[str], session: str) -> int | None:
    """How far ``session`` was mined: the furthest of ``users``' cursors of it."""
    rows = rows_in(c, "SELECT upto FROM extraction_cursors WHERE tenant = ? AND session IN",
                   [cursor_key(u, session) for u in users], (tenant,))
    return max((int(r[0]) for r in rows), default=None)


def _sessions(c: Connection, tenant: str, user: str) -> list[str]:
    union = " UNION ".join(
        f"SELECT session FROM {table} WHERE tenant = ? AND user = ? AND session IS NOT NULL"
        for table in _OWNED
    )
    return [str(r[0]) for r in c.execute(f"{union} ORDER BY 1", (tenant, user) * len(_OWNED))]


def _rows(c: Connection, sql: str, args: Sequence[Any]) -> list[dict[str, Any]]:
    return [dict(r) for r in c.execute(sql, tuple(args))]


# ---------------------------------------------------------------- forget


def _forget(c: Connection, tenant: str, user: str) -> dict[str, int]:
    who = (tenant, user)
    sessions = _sessions(c, tenant, user)
    counts = {"vectors": 0}
    for kind in ("fragments", "items"):
        counts["vectors"] += c.execute(
            f"DELETE FROM vec_{kind} WHERE rowid IN (SELECT id FROM {kind} WHERE tenant = ? AND user = ?)",
            who,
        ).rowcount
    for table in _OWNED:
        counts[table] = c.execute(f"DELETE FROM {table} WHERE tenant = ? AND user = ?", who).rowcount
    counts["forgotten_turns"] = c.execute("DELETE FROM forgotten_turns WHERE tenant = ? AND user = ?", who).rowcount
    c.execute(f"DELETE FROM {SIGHTINGS} WHERE tenant = ? AND user = ?", who)
    counts["extraction_cursors"] = sum(
        c.execute(
            "DELETE FROM extraction_cursors WHERE tenant = ? AND session = ?", (tenant, cursor_key(user, s))
        ).rowcount
        for s in sessions
    )
    # Other processes' in-memory indexes watch this to drop the scope (migrations m004).
    bump_generation(c, tenant, user)
    return counts


# ---------------------------------------------------------------- restore


def _restore_step(c: Connection, tenant: str, user: str, step: plan.Step) -> Any:
    """One step of ``user_restore.steps`` in SQLite (one writer: the scope needs no lock)."""
    match step:
        case plan.Insert(table, columns, values, vector, new_id):
            marks = ", ".join("?" * (len(values) + 1))
            sql = f"INSERT OR IGNORE INTO {table} (tenant, {columns}) VALUES ({marks})"
            if not c.execute(sql, (tenant, *values)).rowcount:
                return 0
            rowid = int(c.execute("SELECT last_insert_rowid()").fetchone()[0])
            if vector is not None:
                c.execute(
                    f"INSERT INTO vec_{table} (rowid, embedding, scope) VALUES (?, ?, ?)",
                    (rowid, np.asarray(vector, dtype=np.float32).tobytes(), scope_of(tenant, user)),
                )
            return rowid if new_id else 1
        case plan.FindItem(key, content):
            row = c.execute(
                "SELECT id FROM items WHERE tenant = ? AND user = ? AND key = ? AND content = ?",
                (tenant, user, key, content),
            ).fetchone()
            return None if row is None else int(row[0])
        case plan.Supersede(successor, item_id):
            c.execute(
                "UPDATE items SET superseded_by = ? WHERE id = ? AND superseded_by IS NULL", (successor, item_id)
            )
        case plan.History(item_id, events):
            c.execute("DELETE FROM item_events WHERE item = ? AND tenant = ?", (item_id, tenant))
            c.executemany(
                'INSERT INTO item_events (tenant, item, user, event, at, "by", detail) VALUES (?, ?, ?, ?, ?, ?, ?)',
                [(tenant, *e) for e in events],
            )
        case plan.Cursor(session, upto):
            c.execute(
                "INSERT INTO extraction_cursors (tenant, session, upto) VALUES (?, ?, ?)"
                " ON CONFLICT (tenant, session) DO UPDATE SET upto = max(upto, excluded.upto)",
                (tenant, session, upto),
            )
    return None


# ---------------------------------------------------------------- sessions


def _activity(c: Connection, tenant: str, session: str) -> dict[str, Any] | None:
    users = [
        str(r[0])
        for r in c.execute(
            " UNION ".join(f"SELECT user FROM {t} WHERE tenant = ? AND session = ?" for t in _OWNED),
            (tenant, session) * len(_OWNED),
        )
    ]
    fragments = c.execute(
        "SELECT count(*) FROM fragments WHERE tenant = ? AND session = ?", (tenant, session)
    ).fetchone()[0]
    return fmt.activity(users, int(fragments), _cursor(c, tenant, users, session))
