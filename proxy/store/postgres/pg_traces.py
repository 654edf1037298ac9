"""Traces on PostgreSQL: the same contract as ``sqlite_traces.TraceStore``."""

from __future__ import annotations

import json
import time
from typing import Any

from psycopg.rows import dict_row

from ..filters import conditions
from ..sqlite.sqlite_traces import trace_summary
from .pg_database import PgDatabase


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

    async def recent(
        self, tenant: str, *, user: str | None = None, session: str | None = None,
        degraded: bool | None = None, after: str | None = None, limit: int = 20,
    ) -> list[dict[str, Any]]:
        """The tenant's traces, newest first, after the trace ``after``; filters narrow them."""
        where, args = conditions((("tenant =", tenant), ('"user" =', user), ("session =", session)), "%s")
        if degraded is not None:
            where.append(f"(data::jsonb ->> 'degraded') IS {'NOT ' if degraded else ''}NULL")
        if after is not None:
            # Keyset: strictly older than the cursor row, ties broken by id.
            where.append("(created, id) < (SELECT created, id FROM traces WHERE tenant = %s AND id = %s)")
            args += [tenant, after]
        sql = (
            'SELECT id, "user", session, created, data FROM traces WHERE ' + " AND ".join(where)
            + " ORDER BY created DESC, id DESC LIMIT %s"
        )
        async with self.db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(sql, (*args, limit))
            return [trace_summary(r) for r in await cur.fetchall()]

    async def prune(self, older_than_s: float) -> int:
        async with self.db.connection() as conn:
            cur = await conn.execute(
                "DELETE FROM traces WHERE created < %s", (time.time() - older_than_s,)
            )
            return max(int(cur.rowcount), 0)
