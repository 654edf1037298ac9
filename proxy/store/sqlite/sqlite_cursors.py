"""How far each session's turns were mined for memories, and who is mining the next ones.

A claim is a lease on the session's cursor, taken by compare-and-set in one
transaction: it holds only while the cursor still stands where the claimant
read it and no live lease of another holds it. So two records of one session
— in one process or in several sharing the database — never extract the same
turns twice. The cursor moves only when a claim finishes; a claim released
(the extraction failed) or left to expire (its process died) leaves the turns
to the next claimant.
"""

from __future__ import annotations

import time

from .sqlite_database import Connection, Database


class ExtractionCursorStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def cursor(self, tenant: str, session: str) -> int:
        """How many of the session's conversation messages were mined already."""
        row = await self.db.read(
            lambda c: c.execute(
                "SELECT upto FROM extraction_cursors WHERE tenant = ? AND session = ?", (tenant, session)
            ).fetchone(),
            quick=True,
        )
        return 0 if row is None else int(row[0])

    async def claim(self, tenant: str, session: str, done: int, owner: str, lease_s: float) -> bool:
        """Lease (or renew) the turns from ``done`` on for ``owner``; False when the cursor moved or another holds them."""
        now = time.time()

        def write(c: Connection) -> bool:
            c.execute(
                "INSERT INTO extraction_cursors (tenant, session, upto, owner, lease_expires)"
                " VALUES (?, ?, 0, ?, ?) ON CONFLICT (tenant, session) DO UPDATE"
                " SET owner = excluded.owner, lease_expires = excluded.lease_expires"
                " WHERE extraction_cursors.upto = ?"
                " AND (extraction_cursors.owner IS NULL OR extraction_cursors.lease_expires < ?"
                " OR extraction_cursors.owner = excluded.owner)",  # its holder renews it
                (tenant, session, owner, now + lease_s, done, now),
            )
            row = c.execute(
                "SELECT upto, owner FROM extraction_cursors WHERE tenant = ? AND session = ?", (tenant, session)
            ).fetchone()
            return int(row[0]) == done and row[1] == owner

        return await self.db.write(write)

    async def finish(self, tenant: str, session: str, owner: str, upto: int) -> None:
        """Move the cursor to ``upto`` and end ``owner``'s claim (nothing if it lost the claim)."""
        await self.db.write(
            lambda c: c.execute(
                "UPDATE extraction_cursors SET upto = max(upto, ?), owner = NULL, lease_expires = NULL"
                " WHERE tenant = ? AND session = ? AND owner = ?",
                (upto, tenant, session, owner),
            )
        )

    async def release(self, tenant: str, session: str, owner: str) -> None:
        """End ``owner``'s claim and leave the cursor where it was: the turns go to the next claimant."""
        await self.db.write(
            lambda c: c.execute(
                "UPDATE extraction_cursors SET owner = NULL, lease_expires = NULL"
                " WHERE tenant = ? AND session = ? AND owner = ?",
                (tenant, session, owner),
            )
        )
