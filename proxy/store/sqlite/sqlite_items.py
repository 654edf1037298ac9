"""Structured memory items: stored, deduplicated, superseded, expired — never silently lost.

Superseded items stay (status ``superseded``, ``superseded_by``) so the
history is exportable; they are never ranked again. Vectors live in
``vec_items``, partitioned by scope like fragments.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Sequence

import numpy as np

from ..filters import stale_items
from ..records import (
    ITEM_COLUMNS,
    Choose,
    ItemRow,
    ItemWrite,
    NewItem,
    item_row,
    merged_sources,
    scope_of,
)
from .sqlite_database import Connection, Database
from .sqlite_fragments import suppress


class ItemStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def active_with_vectors(self, tenant: str, user: str) -> list[tuple[ItemRow, np.ndarray]]:
        return await self.db.read(lambda c: _active(c, tenant, user))

    async def active_and_superseded(
        self, tenant: str, user: str
    ) -> tuple[list[tuple[ItemRow, np.ndarray]], list[ItemRow]]:
        """``active_with_vectors``, and the superseded items by id, in one read (the search's item scope)."""
        return await self.db.read(lambda c: (_active(c, tenant, user), [
            item_row(r) for r in c.execute(
                f"SELECT {ITEM_COLUMNS} FROM items WHERE tenant = ? AND user = ? AND status = 'superseded'"
                " ORDER BY id",
                (tenant, user),
            )
        ]))

    async def remember(
        self, tenant: str, user: str, session: str | None, item: NewItem, vector: np.ndarray, choose: Choose
    ) -> tuple[ItemWrite, int]:
        """In one transaction: ``choose`` against the user's active items, then do what it chose.

        A merge bumps the chosen item's seen count and adds the new item's
        turns to its sources; otherwise ``item`` is
        inserted, the items it supersedes are marked so, and the fragments
        they came from are suppressed. Returns the choice and the id of the
        item that now holds the fact.
        """
        now = time.time()

        def write(c: Connection) -> tuple[ItemWrite, int]:
            choice = choose(_active(c, tenant, user))
            if choice.merge_into is not None:
                row = c.execute(
                    "SELECT fragment_hashes FROM items WHERE tenant = ? AND user = ? AND id = ?",
                    (tenant, user, choice.merge_into),
                ).fetchone()
                c.execute(
                    "UPDATE items SET seen_count = seen_count + 1, updated = ?, fragment_hashes = ?"
                    " WHERE tenant = ? AND user = ? AND id = ?",
                    (now, merged_sources(row[0] if row else "[]", item.fragment_hashes), tenant, user,
                     choice.merge_into),
                )
                return choice, choice.merge_into
            new_id = _insert(c, tenant, user, session, choice.stored(item), vector, now)
            for old in choice.supersedes:
                row = c.execute(
                    "UPDATE items SET status = 'superseded', superseded_by = ?, updated = ?"
                    " WHERE tenant = ? AND user = ? AND id = ? RETURNING fragment_hashes",
                    (new_id, now, tenant, user, old),
                ).fetchone()
                if row is not None and old not in choice.keep_turns_of:
                    # Neither a superseded fact nor the turns it came from may be injected again.
                    suppress(c, tenant, user, json.loads(row[0]))
            if choice.supersedes and choice.suppress:
                suppress(c, tenant, user, list(choice.suppress))
            return choice, new_id

        return await self.db.write(write)

    async def get(self, tenant: str, user: str, ids: Sequence[int]) -> dict[int, ItemRow]:
        if not ids:
            return {}

        def read(c: Connection) -> dict[int, ItemRow]:
            marks = ",".join("?" * len(ids))
            rows = c.execute(
                f"SELECT {ITEM_COLUMNS} FROM items WHERE tenant = ? AND user = ? AND id IN ({marks})",
                (tenant, user, *ids),
            ).fetchall()
            return {int(r["id"]): item_row(r) for r in rows}

        return await self.db.read(read)

    async def all(
        self, tenant: str, user: str, *, include_inactive: bool = False
    ) -> list[ItemRow]:
        where = "" if include_inactive else " AND status = 'active'"
        return await self.db.read(
            lambda c: [
                item_row(r)
                for r in c.execute(
                    f"SELECT {ITEM_COLUMNS} FROM items WHERE tenant = ? AND user = ?{where} ORDER BY id",
                    (tenant, user),
                )
            ]
        )

    async def knn(self, tenant: str, user: str, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        blob = np.asarray(vector, dtype=np.float32).tobytes()
        rows = await self.db.read(
            lambda c: c.execute(
                "SELECT rowid, distance FROM vec_items WHERE embedding MATCH ? AND k = ? AND scope = ?",
                (blob, k, scope_of(tenant, user)),
            ).fetchall()
        )
        return [(int(r[0]), 1.0 - float(r[1])) for r in rows]

    async def terms(self, tenant: str, user: str) -> list[tuple[int, str]]:
        return await self.db.read(
            lambda c: [
                (int(r[0]), str(r[1]))
                for r in c.execute(
                    "SELECT id, terms FROM items WHERE tenant = ? AND user = ? AND status = 'active'",
                    (tenant, user),
                )
            ]
        )

    async def version(self, tenant: str, user: str) -> tuple[int, float]:
        """Changes whenever the user's items change: (count, last update)."""
        row = await self.db.read(
            lambda c: c.execute(
                "SELECT count(*), coalesce(max(updated), 0) FROM items WHERE tenant = ? AND user = ?",
                (tenant, user),
            ).fetchone(),
            quick=True,
        )
        return int(row[0]), float(row[1])

    async def touch(self, tenant: str, user: str, ids: Sequence[int]) -> None:
        if not ids:
            return
        now = time.time()

        def write(c: Connection) -> None:
            marks = ",".join("?" * len(ids))
            c.execute(
                "UPDATE items SET access_count = access_count + 1, last_access = ?"
                f" WHERE tenant = ? AND user = ? AND id IN ({marks})",
                (now, tenant, user, *ids),
            )

        await self.db.write(write)

    async def expire(self, now: dt.datetime) -> int:
        """Delete items whose expiry has passed (their vectors first: vec0 has no cascade)."""
        at = now.timestamp()

        def write(c: Connection) -> int:
            c.execute("DELETE FROM vec_items WHERE rowid IN (SELECT id FROM items WHERE expires <= ?)", (at,))
            return int(c.execute("DELETE FROM items WHERE expires <= ?", (at,)).rowcount)

        return await self.db.write(write)

    async def archive_stale(
        self,
        cutoff: float,
        importance_floor: float,
        *,
        only: Sequence[str] | None = None,
        skip: Sequence[str] = (),
    ) -> int:
        """Archive active items below ``importance_floor`` untouched since ``cutoff``.

        Of the tenants ``only`` (every tenant when None), except those in ``skip``.
        """
        where, args = stale_items(cutoff, importance_floor, only, skip, "?")
        sql = f"UPDATE items SET status = 'archived' WHERE {where}"
        return int(await self.db.write(lambda c: c.execute(sql, args).rowcount))


def _active(c: Connection, tenant: str, user: str) -> list[tuple[ItemRow, np.ndarray]]:
    rows = c.execute(
        f"SELECT {ITEM_COLUMNS}, v.embedding FROM items i JOIN vec_items v ON v.rowid = i.id"
        " WHERE i.tenant = ? AND i.user = ? AND i.status = 'active'",
        (tenant, user),
    ).fetchall()
    return [(item_row(r), np.frombuffer(r["embedding"], dtype=np.float32)) for r in rows]


def _insert(
    c: Connection, tenant: str, user: str, session: str | None, item: NewItem, vector: np.ndarray, now: float
) -> int:
    cur = c.execute(
        "INSERT INTO items (tenant, user, session, type, category, standing, about, key, content, terms,"
        " importance, confidence, source, expires_at, expires, turns, fragment_hashes, created, updated)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (tenant, user, session, item.type, item.category, int(item.standing), item.about, item.key,
         item.content, item.terms,
         item.importance, item.confidence, item.source, item.expires_at, item.expires,
         json.dumps(list(item.turns)), json.dumps(list(item.fragment_hashes)), now, now),
    )
    new_id = int(cur.lastrowid)
    c.execute(
        "INSERT INTO vec_items (rowid, embedding, scope) VALUES (?, ?, ?)",
        (new_id, np.asarray(vector, dtype=np.float32).tobytes(), scope_of(tenant, user)),
    )
    return new_id


