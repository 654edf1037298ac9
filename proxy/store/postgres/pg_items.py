"""Structured memory items on PostgreSQL: the same contract as ``sqlite_items.ItemStore``.

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

from ..filters import stale_items
from ..records import ITEM_COLUMNS, Choose, ItemRow, ItemWrite, NewItem, item_row, merged_sources
from .pg_coordination import lock_scope
from .pg_database import PgConnection, PgDatabase, nearest
from .pg_fragments import suppress

_SCOPE = 'tenant = %s AND "user" = %s'


class PgItemStore:
    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    async def active_with_vectors(self, tenant: str, user: str) -> list[tuple[ItemRow, np.ndarray]]:
        async with self.db.connection() as conn:
            return await _active(conn, tenant, user)

    async def active_and_superseded(
        self, tenant: str, user: str
    ) -> tuple[list[tuple[ItemRow, np.ndarray]], list[ItemRow]]:
        """``active_with_vectors``, and the superseded items by id, on one connection (the search's item scope)."""
        async with self.db.connection() as conn:
            active = await _active(conn, tenant, user)
            return active, await _rows(conn, f"WHERE {_SCOPE} AND status = 'superseded' ORDER BY id", (tenant, user))

    async def remember(
        self, tenant: str, user: str, session: str | None, item: NewItem, vector: np.ndarray, choose: Choose
    ) -> tuple[ItemWrite, int]:
        """In one transaction: ``choose`` against the user's active items, then do what it chose.

        The scope's lock (``lock_scope``) makes the choice and the write one step across
        replicas: two replicas remembering one fact for one user never both insert it.
        """
        now = time.time()
        async with self.db.transaction() as conn:
            await lock_scope(conn, tenant, user)
            choice = choose(await _active(conn, tenant, user))
            if choice.merge_into is not None:
                cur = await conn.execute(
                    f"SELECT fragment_hashes FROM items WHERE {_SCOPE} AND id = %s", (tenant, user, choice.merge_into)
                )
                row = await cur.fetchone()
                await conn.execute(
                    f"UPDATE items SET seen_count = seen_count + 1, updated = %s, fragment_hashes = %s"
                    f" WHERE {_SCOPE} AND id = %s",
                    (now, merged_sources(row[0] if row else "[]", item.fragment_hashes), tenant, user,
                     choice.merge_into),
                )
                return choice, choice.merge_into
            item = choice.stored(item)
            cur = await conn.execute(
                'INSERT INTO items (tenant, "user", session, type, category, standing, about, key, content, terms,'
                " importance, confidence, source, expires_at, expires, turns, fragment_hashes, created, updated,"
                " embedding) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s,"
                " %s) RETURNING id",
                (tenant, user, session, item.type, item.category, int(item.standing), item.about, item.key,
                 item.content, item.terms,
                 item.importance, item.confidence, item.source, item.expires_at, item.expires,
                 json.dumps(list(item.turns)), json.dumps(list(item.fragment_hashes)), now, now,
                 np.asarray(vector, dtype=np.float32)),
            )
            row = await cur.fetchone()
            new_id = int(row[0])
            for old in choice.supersedes:
                cur = await conn.execute(
                    "UPDATE items SET status = 'superseded', superseded_by = %s, updated = %s"
                    f" WHERE {_SCOPE} AND id = %s RETURNING fragment_hashes",
                    (new_id, now, tenant, user, old),
                )
                hidden = await cur.fetchone()
                if hidden is not None and old not in choice.keep_turns_of:
                    # Neither a superseded fact nor the turns it came from may be injected again.
                    await suppress(conn, tenant, user, json.loads(hidden[0]))
            if choice.supersedes and choice.suppress:
                await suppress(conn, tenant, user, list(choice.suppress))
            return choice, new_id

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

    async def expire(self, now: dt.datetime) -> int:
        """Delete items whose expiry has passed."""
        async with self.db.connection() as conn:
            cur = await conn.execute("DELETE FROM items WHERE expires <= %s", (now.timestamp(),))
            return max(int(cur.rowcount), 0)

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
        where, args = stale_items(cutoff, importance_floor, only, skip, "%s")
        sql = f"UPDATE items SET status = 'archived' WHERE {where}"
        async with self.db.connection() as conn:
            cur = await conn.execute(sql, args)
            return max(int(cur.rowcount), 0)

    async def _select(self, where: str, args: Sequence[Any]) -> list[ItemRow]:
        async with self.db.connection() as conn:
            return await _rows(conn, where, args)


async def _rows(conn: PgConnection, where: str, args: Sequence[Any]) -> list[ItemRow]:
    """The items ``where`` selects, on ``conn``."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(f"SELECT {ITEM_COLUMNS} FROM items {where}", tuple(args))
        return [item_row(r) for r in await cur.fetchall()]


async def _active(conn: PgConnection, tenant: str, user: str) -> list[tuple[ItemRow, np.ndarray]]:
    async with conn.cursor(row_factory=dict_row, binary=True) as cur:
        await cur.execute(
            f"SELECT {ITEM_COLUMNS}, embedding FROM items WHERE {_SCOPE} AND status = 'active'"
            " AND embedding IS NOT NULL ORDER BY id",
            (tenant, user),
        )
        return [(item_row(r), r["embedding"]) for r in await cur.fetchall()]
