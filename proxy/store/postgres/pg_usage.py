"""Token usage per tenant, model and UTC day on PostgreSQL: the contract of ``sqlite_usage.UsageStore``.

Replicas add to the same rows side by side: each addition is one upsert that
adds to what is stored (``ON CONFLICT ... DO UPDATE``), so none is lost.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from psycopg.rows import dict_row

from ..filters import conditions
from ..sqlite.sqlite_usage import COUNTS
from .pg_database import PgDatabase


class PgUsageStore:
    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    async def add(self, rows: Mapping[tuple[str, str, str], Mapping[str, int]]) -> None:
        """Add counts keyed by (tenant, model, day) to what is stored, in one transaction."""
        if not rows:
            return
        sets = ", ".join(f"{k} = usage.{k} + excluded.{k}" for k in COUNTS)
        sql = (
            f"INSERT INTO usage (tenant, model, day, {', '.join(COUNTS)})"
            f" VALUES (%s, %s, %s, {', '.join(['%s'] * len(COUNTS))})"
            f" ON CONFLICT (tenant, day, model) DO UPDATE SET {sets}"
        )
        # Sorted: two replicas flushing the same keys lock the rows in one order, never a deadlock.
        args = [
            (tenant, model, day, *(int(counts.get(k, 0)) for k in COUNTS))
            for (tenant, model, day), counts in sorted(rows.items())
        ]
        async with self.db.transaction() as conn, conn.cursor() as cur:
            await cur.executemany(sql, args)

    async def rows(
        self, tenant: str | None, since: str | None = None, until: str | None = None
    ) -> list[dict[str, Any]]:
        """Stored rows, by day then tenant then model; ``since``/``until`` are inclusive days."""
        where, args = conditions((("tenant =", tenant), ("day >=", since), ("day <=", until)), "%s")
        sql = (
            f"SELECT tenant, model, day, {', '.join(COUNTS)} FROM usage WHERE {' AND '.join(['1 = 1', *where])}"
            ' ORDER BY day, tenant COLLATE "C", model COLLATE "C"'
        )
        async with self.db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(sql, args)
            return [{k: (int(v) if k in COUNTS else v) for k, v in r.items()} for r in await cur.fetchall()]
