"""Structured memory items on PostgreSQL: the same contract as ``items.ItemStore``.

The vector is a column of the item's row, so an item and its vector are
inserted and deleted together.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from psycopg.rows import dict_row

from ..memory.lifecycle import is_expired
from .items import ItemRow, NewItem
from .items import _row as item_row
from .postgres import PgDatabase, nearest

_COLUMNS = (
    "id, session, type, key, content, importance, confidence, source, expires_at, status,"
    " superseded_by, turns, fragment_hashes, seen_count, access_count, last_access, created, updated"
)
_SCOPE = 'tenant = %s AND "user" = %s'


class PgItemStore:
    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    async def active_with_vectors(self, tenant: str, user: str) -> list[tuple[ItemRow, np.ndarray]]:
        async with self.db.connection() as conn, conn.cursor(row_factory=dict_row, binary=True) as cur:
            await cur.execute(
                f"SELECT {_COLUMNS}, embedding FROM items WHERE {_SCOPE} AND status = 'active'"
                " AND embedding IS NOT NULL ORDER BY id",
                (tenant, user),
            )
            return [(item_row(r), r["embedding"]) for r in await cur.fetchall()]

    async def add(
        self, tenant: str, user: str, session: str | None, item: NewItem, vector: np.ndarray,
        supersedes: Sequence[int] = (),
    ) -> int:
        """Insert an item (and mark ``supersedes`` superseded by it) in one transaction."""
        now = time.time()
        async with self.db.transaction() as conn:
            cur = await conn.execute(
                'INSERT INTO items (tenant, "user", session, type, key, content, terms, importance,'
                " confidence, source, expires_at, turns, fragment_hashes, created, updated, embedding)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
                (tenant, user, session, item.type, item.key, item.content, item.terms,
                 item.importance, item.confidence, item.source, item.expires_at,
                 json.dumps(list(item.turns)), json.dumps(list(item.fragment_hashes)), now, now,
                 np.asarray(vector, dtype=np.float32)),
            )
            row = await cur.fetchone()
            new_id = int(row[0])
            if supersedes:
                await conn.execute(
                    "UPDATE items SET status = 'superseded', superseded_by = %s, updated = %s"
                    f" WHERE {_SCOPE} AND id = ANY(%s)",
                    (new_id, now, tenant, user, list(supersedes)),
                )
            return new_id

    async def merge(self, tenant: str, user: str, item_id: int) -> None:
        async with self.db.connection() as conn:
            await conn.execute(
                f"UPDATE items SET seen_count = seen_count + 1, updated = %s WHERE {_SCOPE} AND id = %s",
                (time.time(), tenant, user, item_id),
            )

    async def get(self, tenant: str, user: str, ids: Sequence[int]) -> dict[int, ItemRow]:
        if not ids:
            return {}
        rows = await self._select(f"WHERE {_SCOPE} AND id = ANY(%s)", (tenant, user, list(ids)))
        return {r.id: r for r in rows}

    async def all(self, tenant: str, user: str, *, include_inactive: bool = False) -> list[ItemRow]:
        where = "" if include_inactive else " AND status = 'active'"
        return await self._select(f"WHERE {_SCOPE}{where} ORDER BY id", (tenant, user))

    async def knn(self, tenant: str, user: str, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        return await nearest(self.db, "items", tenant, user, vector, k)

    async def terms(self, tenant: str, user: str) -> list[tuple[int, str]]:
        async with self.db.connection() as conn:
            cur = await conn.execute(
                f"SELECT id, terms FROM items WHERE {_SCOPE} AND status = 'active'", (tenant, user)
            )
            return [(int(r[0]), str(r[1])) for r in await cur.fetchall()]

    async def version(self, tenant: str, user: str) -> tuple[int, float]:
        """Changes whenever the user's items change: (count, last update)."""
        async with self.db.connection() as conn:
            cur = await conn.execute(
                f"SELECT count(*), coalesce(max(updated), 0) FROM items WHERE {_SCOPE}", (tenant, user)
            )
            row = await cur.fetchone()
        return int(row[0]), float(row[1])

    async def touch(self, tenant: str, user: str, ids: Sequence[int]) -> None:
        if not ids:
            return
        async with self.db.connection() as conn:
            await conn.execute(
                "UPDATE items SET access_count = access_count + 1, last_access = %s"
                f" WHERE {_SCOPE} AND id = ANY(%s)",
                (time.time(), tenant, user, list(ids)),
            )

    async def delete(self, tenant: str, user: str, item_id: int) -> bool:
        async with self.db.connection() as conn:
            cur = await conn.execute(f"DELETE FROM items WHERE {_SCOPE} AND id = %s", (tenant, user, item_id))
            return bool(cur.rowcount)

    async def cursor(self, tenant: str, session: str) -> int:
        async with self.db.connection() as conn:
            cur = await conn.execute(
                "SELECT upto FROM extraction_cursors WHERE tenant = %s AND session = %s", (tenant, session)
            )
            row = await cur.fetchone()
        return 0 if row is None else int(row[0])

    async def set_cursor(self, tenant: str, session: str, upto: int) -> None:
        async with self.db.connection() as conn:
            await conn.execute(
                "INSERT INTO extraction_cursors (tenant, session, upto) VALUES (%s, %s, %s)"
                " ON CONFLICT (tenant, session)"
                " DO UPDATE SET upto = greatest(extraction_cursors.upto, excluded.upto)",
                (tenant, session, upto),
            )

    async def expire(self, now: dt.datetime) -> int:
        """Delete items whose ``expires_at`` has passed."""
        async with self.db.transaction() as conn:
            cur = await conn.execute("SELECT id, expires_at FROM items WHERE expires_at IS NOT NULL")
            ids = [int(r[0]) for r in await cur.fetchall() if is_expired(r[1], now)]
            if ids:
                await conn.execute("DELETE FROM items WHERE id = ANY(%s)", (ids,))
        return len(ids)

    async def archive_stale(self, cutoff: float, importance_floor: float) -> int:
        async with self.db.connection() as conn:
            cur = await conn.execute(
                "UPDATE items SET status = 'archived' WHERE status = 'active'"
                " AND importance < %s AND coalesce(last_access, created) < %s",
                (importance_floor, cutoff),
            )
            return max(int(cur.rowcount), 0)

    async def _select(self, where: str, args: Sequence[Any]) -> list[ItemRow]:
        async with self.db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(f"SELECT {_COLUMNS} FROM items {where}", tuple(args))
            return [item_row(r) for r in await cur.fetchall()]

