"""Writing a user's export back: rows and fresh vectors, skipping what is already there."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

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
            (tenant, user, f["session"], f["hash"], f["role"], f["text"], f["terms"],
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
        " confidence, source, expires_at, expires, status, turns, fragment_hashes, seen_count,"
        " access_count, last_access, created, updated)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (tenant, user, item["session"], item["type"], item["key"], item["content"],
         item["terms"], item["importance"], item["confidence"],
         item["source"], item["expires_at"], item["expires"], item["status"], json.dumps(item["turns"]),
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
