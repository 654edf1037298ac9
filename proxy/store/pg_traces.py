"""Traces on PostgreSQL: the same contract as ``traces.TraceStore``."""

from __future__ import annotations

import json
import time
from typing import Any

from .postgres import PgDatabase


class PgTraceStore:
    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    async def save(self, tenant: str, user: str, session: str, trace: str, data: dict[str, Any]) -> None:
        # A trace lost to a database crash in the next ~0.2 s is acceptable; an fsync per request
        # is not. Pipelined: the transaction's four statements cost one round trip.
        async with self.db.connection() as conn, conn.pipeline(), conn.transaction():
            await conn.execute("SET LOCAL synchronous_commit = off")
            await conn.execute(
                'INSERT INTO traces (tenant, id, "user", session, created, data)'
                " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (tenant, id) DO UPDATE SET"
                ' "user" = excluded."user", session = excluded.session, created = excluded.created,'
                " data = excluded.data",
                (tenant, trace, user, session, time.time(), json.dumps(data, ensure_ascii=False)),
            )

    async def get(self, tenant: str, trace: str) -> dict[str, Any] | None:
        async with self.db.connection() as conn:
            cur = await conn.execute(
                "SELECT data FROM traces WHERE tenant = %s AND id = %s", (tenant, trace)
            )
            row = await cur.fetchone()
        return None if row is None else dict(json.loads(row[0]))

    async def prune(self, older_than_s: float) -> int:
        async with self.db.connection() as conn:
            cur = await conn.execute(
                "DELETE FROM traces WHERE created < %s", (time.time() - older_than_s,)
            )
            return max(int(cur.rowcount), 0)
