"""Who and what is stored, on PostgreSQL: the contract of ``sqlite_listings.ListingStore``.

Names are compared and ordered byte-wise (``COLLATE "C"``), as SQLite does,
so a page's cursor means the same on either store.
"""

from __future__ import annotations

from typing import Any

from psycopg.rows import dict_row

from ..filters import fragment_page, item_page
from ..records import ITEM_COLUMNS, ItemRow, StoredFragment, item_row
from ..sqlite.sqlite_listings import (
    FRAGMENT_COLUMNS,
    OWNED,
    session_entry,
    stored,
    stored_fragment,
    user_entry,
)
from .pg_database import PgConnection, PgDatabase

_C = 'COLLATE "C"'


class PgListingStore:
    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    async def tenants(self) -> list[str]:
        """Every tenant id with stored data (passthrough scopes included)."""
        union = " UNION ".join(f"SELECT DISTINCT tenant FROM {t}" for t in OWNED)
        async with self.db.connection() as conn:
            cur = await conn.execute(f"SELECT tenant FROM ({union}) AS t ORDER BY tenant {_C}")
            return [str(r[0]) for r in await cur.fetchall()]

    async def users(self, tenant: str, after: str | None, limit: int) -> list[dict[str, Any]]:
        """Users in name order after ``after``, each with counts and when last seen."""
        union = " UNION ".join(
            f'SELECT "user" FROM {t} WHERE tenant = %s AND "user" {_C} > %s' for t in OWNED
        )
        async with self.db.connection() as conn:
            cur = await conn.execute(
                f'SELECT "user" FROM ({union}) AS u ORDER BY "user" {_C} LIMIT %s',
                (tenant, after or "") * len(OWNED) + (limit,),
            )
            names = [str(r[0]) for r in await cur.fetchall()]
            return [await _user(conn, tenant, name) for name in names]

    async def user(self, tenant: str, user: str) -> dict[str, Any] | None:
        async with self.db.connection() as conn:
            return stored(await _user(conn, tenant, user))

    async def items(
        self, tenant: str, user: str, *, after: int | None, limit: int,
        status: str | None = "active", kind: str | None = None,
    ) -> list[ItemRow]:
        """A page of the user's items in id order; ``status``/``kind`` None: any."""
        where, args = item_page(tenant, user, after, status, kind, "%s")
        sql = f"SELECT {ITEM_COLUMNS} FROM items WHERE {where} ORDER BY id LIMIT %s"
        return await self._items(sql, (*args, limit))

    async def fragments(
        self, tenant: str, user: str, *, after: int | None, limit: int,
        session: str | None = None, status: str | None = "active",
    ) -> list[StoredFragment]:
        """A page of the user's fragments in id order; ``session``/``status`` None: any."""
        where, args = fragment_page(tenant, user, after, session, status, "%s")
        sql = f"SELECT {FRAGMENT_COLUMNS} FROM fragments WHERE {where} ORDER BY id LIMIT %s"
        async with self.db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(sql, (*args, limit))
            return [stored_fragment(r) for r in await cur.fetchall()]

    async def important(self, tenant: str, user: str, floor: float, limit: int) -> list[ItemRow]:
        """The user's active items of at least ``floor`` importance, most important first."""
        sql = (
            f"SELECT {ITEM_COLUMNS} FROM items WHERE tenant = %s AND \"user\" = %s AND status = 'active'"
            " AND importance >= %s ORDER BY importance DESC, id LIMIT %s"
        )
        return await self._items(sql, (tenant, user, floor, limit))

    async def sessions(self, tenant: str, user: str) -> list[dict[str, Any]]:
        """The user's sessions, the latest begun first (``Listings.sessions``; a user has tens to hundreds)."""
        async with self.db.connection() as conn:
            return await _sessions(conn, tenant, user)

    async def _items(self, sql: str, args: tuple[Any, ...]) -> list[ItemRow]:
        async with self.db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(sql, args)
            return [item_row(r) for r in await cur.fetchall()]


async def _one(conn: PgConnection, sql: str, args: tuple[Any, ...]) -> Any:
    cur = await conn.execute(sql, args)
    return await cur.fetchone()


async def _user(conn: PgConnection, tenant: str, user: str) -> dict[str, Any]:
    who = (tenant, user)
    items = await _one(
        conn,
        "SELECT count(*), count(*) FILTER (WHERE status = 'active'), max(updated) FROM items"
        ' WHERE tenant = %s AND "user" = %s', who,
    )
    fragments = await _one(
        conn,
        'SELECT count(*), count(DISTINCT session), max(created) FROM fragments WHERE tenant = %s AND "user" = %s',
        who,
    )
    traces = await _one(conn, 'SELECT count(*), max(created) FROM traces WHERE tenant = %s AND "user" = %s', who)
    return user_entry(user, items, fragments, traces)


async def _sessions(conn: PgConnection, tenant: str, user: str) -> list[dict[str, Any]]:
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            f"""
            SELECT session, min(first) AS first_seen, max(last) AS last_seen,
                   sum(fragments) AS fragments, sum(requests) AS requests
            FROM (
                SELECT session, min(created) AS first, max(created) AS last, count(*) AS fragments,
                       0 AS requests
                FROM fragments WHERE tenant = %s AND "user" = %s GROUP BY session
                UNION ALL
                SELECT session, min(created), max(created), 0, count(*)
                FROM traces WHERE tenant = %s AND "user" = %s GROUP BY session
            ) AS activity
            GROUP BY session ORDER BY first_seen DESC, session {_C} DESC
            """,
            (tenant, user, tenant, user),
        )
        rows = await cur.fetchall()
    cur = await conn.execute(
        'SELECT session, count(*) FROM summaries WHERE tenant = %s AND "user" = %s GROUP BY session',
        (tenant, user),
    )
    summaries = {r[0]: int(r[1]) for r in await cur.fetchall()}
    return [session_entry(r, summaries) for r in rows]
