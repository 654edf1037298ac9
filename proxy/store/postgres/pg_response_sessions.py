"""Responses API response ids → sessions on PostgreSQL: the contract of ``sqlite_response_sessions.ResponseSessionStore``."""

from __future__ import annotations

import time

from ..records import ResponseSession
from .pg_database import PgDatabase


class PgResponseSessionStore:
    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    async def save(self, tenant: str, user: str, response_id: str, session: str, upto: int) -> None:
        async with self.db.connection() as conn:
            await conn.execute(
                'INSERT INTO response_sessions (tenant, response_id, "user", session, upto, created)'
                " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (tenant, response_id) DO UPDATE SET"
                ' "user" = excluded."user", session = excluded.session, upto = excluded.upto,'
                " created = excluded.created",
                (tenant, response_id, user, session, upto, time.time()),
            )

    async def find(self, tenant: str, response_id: str) -> ResponseSession | None:
        async with self.db.connection() as conn:
            cur = await conn.execute(
                "SELECT session, upto FROM response_sessions WHERE tenant = %s AND response_id = %s",
                (tenant, response_id),
            )
            row = await cur.fetchone()
        return None if row is None else ResponseSession(str(row[0]), int(row[1]))
