"""Forgetting part of a user's data: a memory with the turns it came from, one turn, a whole session.

The rules are ``store/forgetting.py``'s. Each call is one write transaction
that moves the scope's generation, so every in-memory index drops what went
at its next search (``FragmentIndex.scope``); items are reloaded when their
count changes (``ItemIndex``).
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
from .sqlite_database import Connection, Database
from .sqlite_fragments import TURN, bump_generation, ids_of, rows_in, source_turns


class ForgetStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def memory(
        self, tenant: str, user: str, item_id: int, *, purge: bool = False, turns: Sequence[str] = (),
        also: Sequence[int] = (),
    ) -> Forgot | None:
        """Delete the item and the user's items ``also`` (the same fact said again), and hide (``purge``:
        delete) the turns they came from — those they name and ``turns`` (hashes found for an item that
        names none, turns that said it again); None: no such item."""
        return await self.db.write(lambda c: _memory(c, tenant, user, item_id, purge, turns, also))

    async def fragment(self, tenant: str, user: str, fragment_id: int) -> Forgot | None:
        """Delete one fragment and the memories drawn only from it; None: no such fragment."""
        return await self.db.write(lambda c: _fragment(c, tenant, user, fragment_id))

    async def session(self, tenant: str, session: str) -> dict[str, int]:
        """Delete the session's fragments, summaries, prefixes, traces and the memories drawn only
        from it, for every user of the tenant it holds. Returns counts per table (zeros: unknown)."""
        return await self.db.write(lambda c: _session(c, tenant, session))


def _memory(
    c: Connection, tenant: str, user: str, item_id: int, purge: bool, more: Sequence[str], also: Sequence[int]
) -> Forgot | None:
    row = c.execute(
        "SELECT fragment_hashes, content FROM items WHERE tenant = ? AND user = ? AND id = ?",
        (tenant, user, item_id),
    ).fetchone()
    if row is None:
        return None
    others = rows_in(c, "SELECT id, fragment_hashes, content FROM items WHERE tenant = ? AND user = ? AND id IN",
                     [i for i in also if i != item_id], (tenant, user))
    gone = [item_id, *(int(r["id"]) for r in others)]
    _delete_items(c, gone)
    named = [h for r in (row, *others) for h in json.loads(r["fragment_hashes"])]
    turns = source_turns(c, tenant, user, [*named, *more])
    traces = 0
    if purge:
        traces = _purge(c, tenant, user, turns, also=[row["content"], *(r["content"] for r in others)])
        _drop_chains(c, tenant, turns)
        _items_after(c, tenant, user, {t["hash"] for t in turns}, delete_drawn=False)
    else:
        rows_in(c, f"UPDATE fragments SET status = '{FORGOTTEN}' WHERE status = 'active' AND id IN", ids_of(turns))
    bump_generation(c, tenant, user)
    return Forgot(tuple(gone), len(turns), purge, traces)


def _fragment(c: Connection, tenant: str, user: str, fragment_id: int) -> Forgot | None:
    row = c.execute(
        f"SELECT {TURN} FROM fragments WHERE tenant = ? AND user = ? AND id = ?", (tenant, user, fragment_id)
    ).fetchone()
    if row is None:
        return None
    traces = _purge(c, tenant, user, [row])
    _drop_chains(c, tenant, [row])
    deleted = _items_after(c, tenant, user, {row["hash"]}, delete_drawn=True)
    bump_generation(c, tenant, user)
    return Forgot(tuple(deleted), 1, True, traces)


def _session(c: Connection, tenant: str, session: str) -> dict[str, int]:
    named = " UNION ".join(
        f"SELECT user FROM {t} WHERE tenant = ? AND session = ?" for t in ("fragments", "items", *SESSION_TABLES)
    )
    users = [str(r[0]) for r in c.execute(named, (tenant, session) * (2 + len(SESSION_TABLES)))]
    counts = dict.fromkeys(("fragments", "items", "vectors", *SESSION_TABLES), 0)
    for user in users:
        turns = c.execute(
            f"SELECT {TURN} FROM fragments WHERE tenant = ? AND user = ? AND session = ?", (tenant, user, session)
        ).fetchall()
        turns = _rehome(c, tenant, user, session, turns)
        counts["traces"] += _purge(c, tenant, user, turns)
        deleted = _items_after(c, tenant, user, {t["hash"] for t in turns}, session, delete_drawn=True)
        counts["fragments"] += len(turns)
        counts["items"] += len(deleted)
        counts["vectors"] += len(turns) + len(deleted)
        bump_generation(c, tenant, user)
    for table in SESSION_TABLES:
        counts[table] += c.execute(f"DELETE FROM {table} WHERE tenant = ? AND session = ?", (tenant, session)).rowcount
    return counts


def _rehome(c: Connection, tenant: str, user: str, session: str, turns: Sequence[Any]) -> list[Any]:
    """Move the forgotten ``session``'s turns another session said too to that session (``rehomed``), drop
    the session's own sightings; returns the turns left to forget."""
    found = rows_in(c, f"SELECT hash, session, position FROM {SIGHTINGS} WHERE tenant = ? AND user = ? AND hash IN",
                    [t["hash"] for t in turns], (tenant, user))
    moves = rehomed(((int(t["id"]), t["hash"]) for t in turns), [(r[0], r[1], int(r[2])) for r in found], session)
    for t in turns:
        if int(t["id"]) in moves:
            other, position = moves[int(t["id"])]
            c.execute("UPDATE fragments SET session = ?, position = ? WHERE id = ?", (other, position, t["id"]))
            c.execute(f"DELETE FROM {SIGHTINGS} WHERE tenant = ? AND user = ? AND hash = ? AND session = ?",
                      (tenant, user, t["hash"], other))
    c.execute(f"DELETE FROM {SIGHTINGS} WHERE tenant = ? AND user = ? AND session = ?", (tenant, user, session))
    return [t for t in turns if int(t["id"]) not in moves]


def _purge(c: Connection, tenant: str, user: str, turns: Sequence[Any], also: Iterable[str] = ()) -> int:
    """Delete ``turns`` and their vectors and sightings, keep their digests, delete the traces holding their
    text. Returns how many traces went."""
    ids = ids_of(turns)
    rows_in(c, "DELETE FROM vec_fragments WHERE rowid IN", ids)
    rows_in(c, "DELETE FROM fragments WHERE id IN", ids)
    rows_in(c, f"DELETE FROM {SIGHTINGS} WHERE tenant = ? AND user = ? AND hash IN", [t["hash"] for t in turns],
            (tenant, user))
    c.executemany(
        "INSERT OR IGNORE INTO forgotten_turns (tenant, user, session, hash) VALUES (?, ?, ?, ?)",
        [(tenant, user, t["session"], t["hash"]) for t in turns],
    )
    needles = trace_needles([*(t["text"] for t in turns), *also])
    gone = 0
    for i in range(0, len(needles), 50):
        part = needles[i : i + 50]
        holds = " OR ".join(["instr(data, ?) > 0"] * len(part))
        gone += c.execute(
            f"DELETE FROM traces WHERE tenant = ? AND user = ? AND ({holds})", (tenant, user, *part)
        ).rowcount
    return gone


def _drop_chains(c: Connection, tenant: str, turns: Sequence[Any]) -> None:
    """Delete the summary chains of the sessions ``turns`` were said in: a summary may retell them."""
    for session in sorted({t["session"] for t in turns}):
        for table in CHAIN_TABLES:
            c.execute(f"DELETE FROM {table} WHERE tenant = ? AND session = ?", (tenant, session))


def _items_after(
    c: Connection, tenant: str, user: str, gone: set[str], session: str | None = None, *, delete_drawn: bool
) -> list[int]:
    """Apply ``drawn_only_from`` to the user's items for turns ``gone``; returns the ids deleted.

    Without ``delete_drawn`` items only stop naming the turns. An item kept
    that named the forgotten ``session`` as its own now names the session of
    a turn it still names (or none).
    """
    rows = c.execute(
        "SELECT id, session, fragment_hashes FROM items WHERE tenant = ? AND user = ? ORDER BY id", (tenant, user)
    ).fetchall()
    items = [(int(r[0]), r[1], json.loads(r[2])) for r in rows]
    deleted, kept = drawn_only_from(items, gone, session)
    if not delete_drawn:
        kept.update({i: [] for i in deleted})
        deleted = []
    _delete_items(c, deleted)
    c.executemany(
        "UPDATE items SET fragment_hashes = ? WHERE id = ?", [(json.dumps(h), i) for i, h in kept.items()]
    )
    if session is not None:
        for item_id, item_session, hashes in items:
            if item_session == session and item_id not in deleted:
                _move(c, tenant, user, item_id, kept.get(item_id, hashes))
    return deleted


def _move(c: Connection, tenant: str, user: str, item_id: int, hashes: Sequence[str]) -> None:
    """The item now belongs to the session of the first stored turn it names (or to none)."""
    sessions = rows_in(c, "SELECT id, session FROM fragments WHERE tenant = ? AND user = ? AND hash IN", hashes,
                   (tenant, user))
    first = min(sessions, key=lambda r: int(r[0]))[1] if sessions else None
    c.execute("UPDATE items SET session = ? WHERE id = ?", (first, item_id))


def _delete_items(c: Connection, ids: Sequence[int]) -> None:
    rows_in(c, "DELETE FROM vec_items WHERE rowid IN", ids)
    rows_in(c, "DELETE FROM items WHERE id IN", ids)
