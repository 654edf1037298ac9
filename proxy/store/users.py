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

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..memory.bm25 import tokenize
from .db import Connection, Database
from .fragments import bump_generation, scope_of

# The export format; bump it when a field changes meaning. Imports accept this version only.
EXPORT_VERSION = 1

_ITEM_COLUMNS = (
    "id, session, type, key, content, importance, confidence, source, expires_at, status,"
    " superseded_by, turns, fragment_hashes, seen_count, access_count, last_access, created, updated"
)
_FRAGMENT_COLUMNS = "id, session, hash, role, text, position, tokens, created, status"
_SUMMARY_COLUMNS = "id, session, level, text, tokens, start, end, created"
_PREFIX_COLUMNS = "session, chain_hash, upto, summary_ids, created"
_OWNED = ("fragments", "items", "summaries", "prefixes", "traces")


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

        Rows already present (same fragment hash, same item key and content,
        same summary id) are skipped, so importing twice adds nothing.
        """
        return await self.db.write(
            lambda c: _restore(c, tenant, user, data, item_vectors, fragment_vectors)
        )

    async def session_activity(self, tenant: str, session: str) -> dict[str, Any] | None:
        """Who a session belongs to and how much of it is indexed; None when nothing names it."""
        return await self.db.read(lambda c: _activity(c, tenant, session))


# ---------------------------------------------------------------- export


def _export(c: Connection, tenant: str, user: str) -> dict[str, Any]:
    who = (tenant, user)
    items = _rows(c, f"SELECT {_ITEM_COLUMNS} FROM items WHERE tenant = ? AND user = ? ORDER BY id", who)
    for item in items:
        item["turns"] = json.loads(item["turns"])
        item["fragment_hashes"] = json.loads(item["fragment_hashes"])
    return {
        "version": EXPORT_VERSION,
        "tenant": tenant,
        "user": user,
        "exported_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "items": items,
        "fragments": _rows(
            c, f"SELECT {_FRAGMENT_COLUMNS} FROM fragments WHERE tenant = ? AND user = ? ORDER BY id", who
        ),
        "sessions": [_session(c, tenant, user, s) for s in _sessions(c, tenant, user)],
        "traces": [
            {**t, "data": json.loads(t["data"])}
            for t in _rows(
                c, "SELECT id, session, created, data FROM traces WHERE tenant = ? AND user = ?"
                " ORDER BY created", who,
            )
        ],
    }


def _session(c: Connection, tenant: str, user: str, session: str) -> dict[str, Any]:
    key = (tenant, user, session)
    prefixes = _rows(
        c, f"SELECT {_PREFIX_COLUMNS} FROM prefixes WHERE tenant = ? AND user = ? AND session = ?"
        " ORDER BY upto", key,
    )
    for p in prefixes:
        p["summary_ids"] = json.loads(p["summary_ids"])
        del p["session"]
    summaries = _rows(
        c, f"SELECT {_SUMMARY_COLUMNS} FROM summaries WHERE tenant = ? AND user = ? AND session = ?"
        " ORDER BY start, level", key,
    )
    for s in summaries:
        del s["session"]
    cursor = c.execute(
        "SELECT upto FROM extraction_cursors WHERE tenant = ? AND session = ?", (tenant, session)
    ).fetchone()
    return {
        "session": session,
        "extraction_cursor": None if cursor is None else int(cursor[0]),
        "summaries": summaries,
        "prefixes": prefixes,
    }


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
    counts["extraction_cursors"] = sum(
        c.execute(
            "DELETE FROM extraction_cursors WHERE tenant = ? AND session = ?", (tenant, s)
        ).rowcount
        for s in sessions
    )
    # Other processes' in-memory indexes watch this to drop the scope (migrations m004).
    bump_generation(c, tenant, user)
    return counts


# ---------------------------------------------------------------- restore


def _restore(
    c: Connection,
    tenant: str,
    user: str,
    data: Mapping[str, Any],
    item_vectors: np.ndarray,
    fragment_vectors: np.ndarray,
) -> dict[str, int]:
    counts = {
        "fragments": _restore_fragments(c, tenant, user, data["fragments"], fragment_vectors),
        "items": _restore_items(c, tenant, user, data["items"], item_vectors),
        "summaries": 0,
        "prefixes": 0,
        "traces": 0,
    }
    for session in data["sessions"]:
        summaries, prefixes = _restore_session(c, tenant, user, session)
        counts["summaries"] += summaries
        counts["prefixes"] += prefixes
    for trace in data["traces"]:
        counts["traces"] += c.execute(
            "INSERT OR IGNORE INTO traces (id, tenant, user, session, created, data)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (trace["id"], tenant, user, trace["session"], trace["created"],
             json.dumps(trace["data"], ensure_ascii=False)),
        ).rowcount
    return counts


def _restore_fragments(
    c: Connection, tenant: str, user: str, fragments: Sequence[Mapping[str, Any]], vectors: np.ndarray
) -> int:
    scope = scope_of(tenant, user)
    added = 0
    for f, vec in zip(fragments, vectors, strict=True):
        cur = c.execute(
            "INSERT OR IGNORE INTO fragments (tenant, user, session, hash, role, text, terms,"
            " position, tokens, created, status) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (tenant, user, f["session"], f["hash"], f["role"], f["text"], " ".join(tokenize(f["text"])),
             f["position"], f["tokens"], f["created"], f["status"]),
        )
        if cur.rowcount:
            _vector(c, "vec_fragments", int(cur.lastrowid), vec, scope)
            added += 1
    return added


def _restore_items(
    c: Connection, tenant: str, user: str, items: Sequence[Mapping[str, Any]], vectors: np.ndarray
) -> int:
    scope = scope_of(tenant, user)
    new_ids: dict[int, int] = {}
    added = 0
    for item, vec in zip(items, vectors, strict=True):
        found = c.execute(
            "SELECT id FROM items WHERE tenant = ? AND user = ? AND key = ? AND content = ?",
            (tenant, user, item["key"], item["content"]),
        ).fetchone()
        if found is not None:
            new_ids[item["id"]] = int(found[0])
            continue
        new_ids[item["id"]] = new_id = _insert_item(c, tenant, user, item)
        _vector(c, "vec_items", new_id, vec, scope)
        added += 1
    # Superseded history keeps pointing at its successor, under the new ids.
    for item in items:
        successor = new_ids.get(item["superseded_by"]) if item["superseded_by"] is not None else None
        if successor is not None:
            c.execute(
                "UPDATE items SET superseded_by = ? WHERE id = ? AND superseded_by IS NULL",
                (successor, new_ids[item["id"]]),
            )
    return added


def _insert_item(c: Connection, tenant: str, user: str, item: Mapping[str, Any]) -> int:
    cur = c.execute(
        "INSERT INTO items (tenant, user, session, type, key, content, terms, importance,"
        " confidence, source, expires_at, status, turns, fragment_hashes, seen_count,"
        " access_count, last_access, created, updated)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (tenant, user, item["session"], item["type"], item["key"], item["content"],
         " ".join(tokenize(item["content"])), item["importance"], item["confidence"],
         item["source"], item["expires_at"], item["status"], json.dumps(item["turns"]),
         json.dumps(item["fragment_hashes"]), item["seen_count"], item["access_count"],
         item["last_access"], item["created"], item["updated"]),
    )
    return int(cur.lastrowid)


def _restore_session(
    c: Connection, tenant: str, user: str, session: Mapping[str, Any]
) -> tuple[int, int]:
    name = session["session"]
    summaries = sum(
        c.execute(
            "INSERT OR IGNORE INTO summaries (id, tenant, user, session, level, text, tokens, start,"
            " end, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (s["id"], tenant, user, name, s["level"], s["text"], s["tokens"], s["start"], s["end"],
             s["created"]),
        ).rowcount
        for s in session["summaries"]
    )
    prefixes = sum(
        c.execute(
            "INSERT OR IGNORE INTO prefixes (tenant, session, user, chain_hash, upto, summary_ids,"
            " created) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (tenant, name, user, p["chain_hash"], p["upto"], json.dumps(p["summary_ids"]), p["created"]),
        ).rowcount
        for p in session["prefixes"]
    )
    if session["extraction_cursor"] is not None:
        c.execute(
            "INSERT INTO extraction_cursors (tenant, session, upto) VALUES (?, ?, ?)"
            " ON CONFLICT (tenant, session) DO UPDATE SET upto = max(upto, excluded.upto)",
            (tenant, name, session["extraction_cursor"]),
        )
    return summaries, prefixes


def _vector(c: Connection, table: str, rowid: int, vec: np.ndarray, scope: str) -> None:
    c.execute(
        f"INSERT INTO {table} (rowid, embedding, scope) VALUES (?, ?, ?)",
        (rowid, np.asarray(vec, dtype=np.float32).tobytes(), scope),
    )


# ---------------------------------------------------------------- sessions


def _activity(c: Connection, tenant: str, session: str) -> dict[str, Any] | None:
    users = sorted(
        str(r[0])
        for r in c.execute(
            " UNION ".join(f"SELECT user FROM {t} WHERE tenant = ? AND session = ?" for t in _OWNED),
            (tenant, session) * len(_OWNED),
        )
    )
    fragments = c.execute(
        "SELECT count(*) FROM fragments WHERE tenant = ? AND session = ?", (tenant, session)
    ).fetchone()[0]
    cursor = c.execute(
        "SELECT upto FROM extraction_cursors WHERE tenant = ? AND session = ?", (tenant, session)
    ).fetchone()
    if not users and cursor is None:
        return None
    return {
        "users": users,
        "fragments": int(fragments),
        "extraction_cursor": None if cursor is None else int(cursor[0]),
    }
