"""Extraction cursors and their claims on PostgreSQL: the same contract as ``sqlite_cursors``."""

from __future__ import annotations

import time

from .pg_database import PgDatabase

_WHERE = "tenant = %s AND session = %s"


class PgExtractionCursorStore:
    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    async def cursor(self, tenant: str, session: str) -> int:
        """How many of the session's conversation messages were mined already."""
        async with self.db.connection() as conn:
            cur = await conn.execute(f"SELECT upto FROM extraction_cursors WHERE {_WHERE}", (tenant, session))
            row = await cur.fetchone()
        return 0 if row is None else int(row[0])

    async def claim(self, tenant: str, session: str, done: int, owner: str, lease_s: float) -> bool:
        """Lease (or renew) the turns from ``done`` on for ``owner``; False when the cursor moved or another holds them."""
        now = time.time()
        async with self.db.connection() as conn:
            cur = await conn.execute(
                "INSERT INTO extraction_cursors (tenant, session, upto, owner, lease_expires)"
                " VALUES (%s, %s, 0, %s, %s) ON CONFLICT (tenant, session) DO UPDATE"
                " SET owner = excluded.owner, lease_expires = excluded.lease_expires"
                " WHERE extraction_cursors.upto = %s"
                " AND (extraction_cursors.owner IS NULL OR extraction_cursors.lease_expires < %s"
                " OR extraction_cursors.owner = excluded.owner)"  # its holder renews it
                " RETURNING upto, owner",
                (tenant, session, owner, now + lease_s, done, now),
            )
            row = await cur.fetchone()
        return row is not None and int(row[0]) == done and row[1] == owner

    async def finish(self, tenant: str, session: str, owner: str, upto: int) -> None:
        """Move the cursor to ``upto`` and end ``owner``'s claim (nothing if it lost the claim)."""
        async with self.db.connection() as conn:
            await conn.execute(
                "UPDATE extraction_cursors SET upto = greatest(upto, %s), owner = NULL, lease_expires = NULL"
                f" WHERE {_WHERE} AND owner = %s",
                (upto, tenant, session, owner),
            )

    async def release(self, tenant: str, session: str, owner: str) -> None:
        """End ``owner``'s claim and leave the cursor where it was: the turns go to the next claimant."""
        async with self.db.connection() as conn:
            await conn.execute(
                f"UPDATE extraction_cursors SET owner = NULL, lease_expires = NULL WHERE {_WHERE} AND owner = %s",
                (tenant, session, owner),
            )
