"""The export format of one user's data, shaped in one place for both stores.

Each store reads the rows in its own SQL (``sqlite_users.py``, ``pg_users.py``)
and hands them here: rows become the export document, an export document
becomes the rows to insert. JSON held in TEXT columns (an item's turns and
sources, a prefix's summary ids, a trace's data) is decoded on the way out
and encoded on the way back, so an export is plain JSON either way.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from typing import Any

from .records import ITEM_COLUMNS as ITEM_COLUMNS

# The export format; bump it when a field changes meaning. Imports accept this version only.
EXPORT_VERSION = 1

# Quoted names ("user", "end") read the same in SQLite and PostgreSQL.
FRAGMENT_COLUMNS = "id, session, hash, role, text, position, tokens, created, status"
SUMMARY_COLUMNS = 'id, session, level, text, tokens, start, "end", created'
PREFIX_COLUMNS = "session, chain_hash, upto, summary_ids, created"
TRACE_COLUMNS = "id, session, created, data"
EVENT_COLUMNS = 'item, event, at, "by", detail'  # an item's history (``item_events``), exported with the item
# Tables whose rows carry (tenant, user): a user's data, and where their sessions are named.
OWNED = ("fragments", "items", "summaries", "prefixes", "traces", "response_sessions")

# Restoring inserts these columns, in this order (``*_values`` give the values).
RESTORED_FRAGMENT = '"user", session, hash, role, text, terms, position, tokens, created, status'
RESTORED_ITEM = (
    '"user", session, type, category, standing, about, key, content, terms, importance, confidence, source,'
    " expires_at, expires,"
    " status, turns, fragment_hashes, seen_count, access_count, last_access, created, updated"
)
RESTORED_SUMMARY = 'id, "user", session, level, text, tokens, start, "end", created'
RESTORED_PREFIX = 'session, "user", chain_hash, upto, summary_ids, created'
RESTORED_TRACE = 'id, "user", session, created, data'


def document(
    tenant: str,
    user: str,
    items: list[dict[str, Any]],
    fragments: list[dict[str, Any]],
    sessions: list[dict[str, Any]],
    traces: list[dict[str, Any]],
    events: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The export of (tenant, user) from its rows (``session_part`` gives each session's); ``events``
    (``EVENT_COLUMNS``, in order) become each item's ``history``: what it said before an edit, when
    it was merged, superseded or archived."""
    history: dict[int, list[dict[str, Any]]] = {}
    for e in events:
        history.setdefault(int(e["item"]), []).append(
            {"event": e["event"], "at": e["at"], "by": e["by"], "detail": json.loads(e["detail"])})
    for item in items:
        item["standing"] = bool(item["standing"])
        item["turns"] = json.loads(item["turns"])
        item["fragment_hashes"] = json.loads(item["fragment_hashes"])
        item["history"] = history.get(int(item["id"]), [])
    return {
        "version": EXPORT_VERSION,
        "tenant": tenant,
        "user": user,
        "exported_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "items": items,
        "fragments": fragments,
        "sessions": sessions,
        "traces": [{**t, "data": json.loads(t["data"])} for t in traces],
    }


def session_part(
    session: str, cursor: int | None, summaries: list[dict[str, Any]], prefixes: list[dict[str, Any]]
) -> dict[str, Any]:
    """One session of an export: its summaries and prefixes (rows without their session) and cursor."""
    for p in prefixes:
        p["summary_ids"] = json.loads(p["summary_ids"])
        del p["session"]
    for s in summaries:
        del s["session"]
    return {
        "session": session,
        "extraction_cursor": None if cursor is None else int(cursor),
        "summaries": summaries,
        "prefixes": prefixes,
    }


def activity(users: Sequence[str], fragments: int, cursor: int | None) -> dict[str, Any] | None:
    """Who a session belongs to and how much of it is indexed; None when no user's data names it
    (a forgotten session keeps only how far it was mined, ``store/forgetting.py``)."""
    if not users:
        return None
    return {
        "users": sorted(users),
        "fragments": int(fragments),
        "extraction_cursor": None if cursor is None else int(cursor),
    }


def fragment_values(user: str, f: Mapping[str, Any]) -> tuple[Any, ...]:
    return (user, f["session"], f["hash"], f["role"], f["text"], f["terms"], f["position"], f["tokens"],
            f["created"], f["status"])


def item_values(user: str, item: Mapping[str, Any]) -> tuple[Any, ...]:
    return (user, item["session"], item["type"], item["category"], int(item["standing"]), item["about"],
            item["key"], item["content"], item["terms"],
            item["importance"], item["confidence"], item["source"], item["expires_at"], item["expires"],
            item["status"], json.dumps(item["turns"]), json.dumps(item["fragment_hashes"]),
            item["seen_count"], item["access_count"], item["last_access"], item["created"], item["updated"])


def event_values(item_id: int, user: str, e: Mapping[str, Any]) -> tuple[Any, ...]:
    """An ``item_events`` row: item, user, event, at, by, detail."""
    return (item_id, user, e["event"], e["at"], e["by"], json.dumps(e["detail"], ensure_ascii=False))


def summary_values(user: str, session: str, s: Mapping[str, Any]) -> tuple[Any, ...]:
    return (s["id"], user, session, s["level"], s["text"], s["tokens"], s["start"], s["end"], s["created"])


def prefix_values(user: str, session: str, p: Mapping[str, Any]) -> tuple[Any, ...]:
    return (session, user, p["chain_hash"], p["upto"], json.dumps(p["summary_ids"]), p["created"])


def trace_values(user: str, t: Mapping[str, Any]) -> tuple[Any, ...]:
    return (t["id"], user, t["session"], t["created"], json.dumps(t["data"], ensure_ascii=False))


def successors(items: Sequence[Mapping[str, Any]], new_ids: Mapping[int, int]) -> list[tuple[int, int]]:
    """(successor's new id, item's new id) for each restored item superseded by another restored one.

    Superseded history keeps pointing at its successor, under the new ids.
    """
    out = []
    for item in items:
        successor = new_ids.get(item["superseded_by"]) if item["superseded_by"] is not None else None
        if successor is not None:
            out.append((successor, new_ids[item["id"]]))
    return out
