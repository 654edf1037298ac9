"""Writing a user's export back: rows and fresh vectors, skipping what is already there."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from . import user_export as fmt
from .db import Connection
from .fragments import scope_of


def restore_user(
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
        counts["traces"] += _insert(c, "traces", fmt.RESTORED_TRACE, tenant, fmt.trace_values(user, trace))
    return counts


def _insert(c: Connection, table: str, columns: str, tenant: str, values: Sequence[Any]) -> int:
    """INSERT OR IGNORE one row of ``tenant``; the row count (0: it was there already)."""
    marks = ", ".join("?" * (len(values) + 1))
    return int(
        c.execute(f"INSERT OR IGNORE INTO {table} (tenant, {columns}) VALUES ({marks})", (tenant, *values)).rowcount
    )


def _restore_fragments(
    c: Connection, tenant: str, user: str, fragments: Sequence[Mapping[str, Any]], vectors: np.ndarray
) -> int:
    scope = scope_of(tenant, user)
    added = 0
    for f, vec in zip(fragments, vectors, strict=True):
        if _insert(c, "fragments", fmt.RESTORED_FRAGMENT, tenant, fmt.fragment_values(user, f)):
            _vector(c, "vec_fragments", _last_id(c), vec, scope)
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
        _insert(c, "items", fmt.RESTORED_ITEM, tenant, fmt.item_values(user, item))
        new_ids[item["id"]] = new_id = _last_id(c)
        _vector(c, "vec_items", new_id, vec, scope)
        added += 1
    for successor, item_id in fmt.successors(items, new_ids):
        c.execute(
            "UPDATE items SET superseded_by = ? WHERE id = ? AND superseded_by IS NULL", (successor, item_id)
        )
    return added


def _restore_session(
    c: Connection, tenant: str, user: str, session: Mapping[str, Any]
) -> tuple[int, int]:
    name = session["session"]
    summaries = sum(
        _insert(c, "summaries", fmt.RESTORED_SUMMARY, tenant, fmt.summary_values(user, name, s))
        for s in session["summaries"]
    )
    prefixes = sum(
        _insert(c, "prefixes", fmt.RESTORED_PREFIX, tenant, fmt.prefix_values(user, name, p))
        for p in session["prefixes"]
    )
    if session["extraction_cursor"] is not None:
        c.execute(
            "INSERT INTO extraction_cursors (tenant, session, upto) VALUES (?, ?, ?)"
            " ON CONFLICT (tenant, session) DO UPDATE SET upto = max(upto, excluded.upto)",
            (tenant, name, session["extraction_cursor"]),
        )
    return summaries, prefixes


def _last_id(c: Connection) -> int:
    return int(c.execute("SELECT last_insert_rowid()").fetchone()[0])


def _vector(c: Connection, table: str, rowid: int, vec: np.ndarray, scope: str) -> None:
    c.execute(
        f"INSERT INTO {table} (rowid, embedding, scope) VALUES (?, ?, ?)",
        (rowid, np.asarray(vec, dtype=np.float32).tobytes(), scope),
    )
