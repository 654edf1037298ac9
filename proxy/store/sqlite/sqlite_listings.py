"""Who and what is stored, for the admin API and the inspector: tenants, users, a user's sessions.

Lists are read a page at a time (``limit`` rows after a cursor) so a tenant
with many users, or a user with many sessions, costs a page, not a scan.
"""

from __future__ import annotations

from typing import Any

from ..filters import fragment_page, item_page
from ..records import ITEM_COLUMNS, ItemRow, StoredFragment, item_row
from .sqlite_database import Connection, Database

# Tables whose rows name a (tenant, user); a user exists while any of them does.
OWNED = ("items", "fragments", "summaries", "traces")
FRAGMENT_COLUMNS = "id, session, role, text, position, tokens, created, status"


class ListingStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def tenants(self) -> list[str]:
        """Every tenant id with stored data (passthrough scopes included)."""
        union = " UNION ".join(f"SELECT DISTINCT tenant FROM {t}" for t in OWNED)
        return await self.db.read(lambda c: [str(r[0]) for r in c.execute(f"{union} ORDER BY 1")])

    async def users(self, tenant: str, after: str | None, limit: int) -> list[dict[str, Any]]:
        """Users in name order after ``after``, each with counts and when last seen."""
        return await self.db.read(lambda c: _users(c, tenant, after or "", limit))

    async def user(self, tenant: str, user: str) -> dict[str, Any] | None:
        return stored(await self.db.read(lambda c: _user(c, tenant, user)))

    async def items(
        self, tenant: str, user: str, *, after: int | None, limit: int,
        status: str | None = "active", kind: str | None = None,
    ) -> list[ItemRow]:
        """A page of the user's items in id order; ``status``/``kind`` None: any."""
        where, args = item_page(tenant, user, after, status, kind, "?")
        sql = f"SELECT {ITEM_COLUMNS} FROM items WHERE {where} ORDER BY id LIMIT ?"
        return await self.db.read(lambda c: [item_row(r) for r in c.execute(sql, (*args, limit))])

    async def fragments(
        self, tenant: str, user: str, *, after: int | None, limit: int,
        session: str | None = None, status: str | None = "active",
    ) -> list[StoredFragment]:
        """A page of the user's fragments in id order; ``session``/``status`` None: any."""
        where, args = fragment_page(tenant, user, after, session, status, "?")
        sql = f"SELECT {FRAGMENT_COLUMNS} FROM fragments WHERE {where} ORDER BY id LIMIT ?"
        return await self.db.read(lambda c: [stored_fragment(r) for r in c.execute(sql, (*args, limit))])

    async def important(self, tenant: str, user: str, floor: float, limit: int) -> list[ItemRow]:
        """The user's active items of at least ``floor`` importance, most important first."""
        sql = (
            f"SELECT {ITEM_COLUMNS} FROM items WHERE tenant = ? AND user = ? AND status = 'active'"
            " AND importance >= ? ORDER BY importance DESC, id LIMIT ?"
        )
        return await self.db.read(
            lambda c: [item_row(r) for r in c.execute(sql, (tenant, user, floor, limit))]
        )

    async def sessions(self, tenant: str, user: str) -> list[dict[str, Any]]:
        """The user's sessions, the latest begun first (``Listings.sessions``; a user has tens to hundreds)."""
        return await self.db.read(lambda c: _sessions(c, tenant, user))


def _users(c: Connection, tenant: str, after: str, limit: int) -> list[dict[str, Any]]:
    union = " UNION ".join(f"SELECT user FROM {t} WHERE tenant = ? AND user > ?" for t in OWNED)
    names = [str(r[0]) for r in c.execute(f"{union} ORDER BY 1 LIMIT ?", (tenant, after) * len(OWNED) + (limit,))]
    return [_user(c, tenant, name) for name in names]


def _user(c: Connection, tenant: str, user: str) -> dict[str, Any]:
    who = (tenant, user)
    items = c.execute(
        "SELECT count(*), coalesce(sum(status = 'active'), 0), max(updated) FROM items"
        " WHERE tenant = ? AND user = ?", who,
    ).fetchone()
    fragments = c.execute(
        "SELECT count(*), count(DISTINCT session), max(created) FROM fragments WHERE tenant = ? AND user = ?",
        who,
    ).fetchone()
    traces = c.execute(
        "SELECT count(*), max(created) FROM traces WHERE tenant = ? AND user = ?", who
    ).fetchone()
    return user_entry(user, items, fragments, traces)


def _sessions(c: Connection, tenant: str, user: str) -> list[dict[str, Any]]:
    rows = c.execute(
        """
        SELECT session, min(first) AS first_seen, max(last) AS last_seen,
               sum(fragments) AS fragments, sum(requests) AS requests
        FROM (
            SELECT session, min(created) AS first, max(created) AS last, count(*) AS fragments,
                   0 AS requests
            FROM fragments WHERE tenant = ? AND user = ? GROUP BY session
            UNION ALL
            SELECT session, min(created), max(created), 0, count(*)
            FROM traces WHERE tenant = ? AND user = ? GROUP BY session
        )
        GROUP BY session ORDER BY first_seen DESC, session DESC
        """,
        (tenant, user, tenant, user),
    ).fetchall()
    summaries = dict(
        c.execute(
            "SELECT session, count(*) FROM summaries WHERE tenant = ? AND user = ? GROUP BY session",
            (tenant, user),
        ).fetchall()
    )
    return [session_entry(r, summaries) for r in rows]


# The entries both stores list, from their rows: one shape, one rule of who exists.


def user_entry(user: str, items: Any, fragments: Any, traces: Any) -> dict[str, Any]:
    """A user's entry from (count, active count, last updated) of items, (count, sessions, last
    created) of fragments and (count, last created) of traces."""
    seen = [t for t in (items[2], fragments[2], traces[1]) if t is not None]
    return {
        "id": user,
        "object": "paperclip.user",
        "memories": int(items[1]),
        "memories_total": int(items[0]),
        "fragments": int(fragments[0]),
        "sessions": int(fragments[1]),
        "requests": int(traces[0]),
        "last_seen": max(seen) if seen else None,
    }


def stored_fragment(r: Any) -> StoredFragment:
    """A ``FRAGMENT_COLUMNS`` row (either store's) as a ``StoredFragment``."""
    return StoredFragment(int(r["id"]), str(r["session"]), str(r["role"]), str(r["text"]), int(r["position"]),
                          int(r["tokens"]), float(r["created"]), str(r["status"]))


def stored(entry: dict[str, Any]) -> dict[str, Any] | None:
    """The entry, or None for a user nothing is stored about."""
    return entry if entry["fragments"] or entry["memories_total"] or entry["requests"] else None


def session_entry(row: Any, summaries: dict[str, int]) -> dict[str, Any]:
    """A session's entry from its activity row and the user's summary counts by session."""
    return {
        "id": row["session"], "object": "paperclip.session", "first_seen": row["first_seen"],
        "last_seen": row["last_seen"], "fragments": int(row["fragments"]),
        "requests": int(row["requests"]), "summaries": int(summaries.get(row["session"], 0)),
    }
