"""Token usage per tenant, model and UTC day: sent by clients, forwarded, billed by the upstream."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..filters import conditions
from .sqlite_database import Connection, Database

COUNTS = (
    "requests", "tokens_client", "tokens_forwarded", "billed_requests",
    "prompt_tokens", "completion_tokens", "cached_tokens",
)


class UsageStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def add(self, rows: Mapping[tuple[str, str, str], Mapping[str, int]]) -> None:
        """Add counts keyed by (tenant, model, day) to what is stored, in one transaction."""
        if rows:
            await self.db.write(lambda c: _add(c, rows))

    async def rows(
        self, tenant: str | None, since: str | None = None, until: str | None = None
    ) -> list[dict[str, Any]]:
        """Stored rows, by day then tenant then model; ``since``/``until`` are inclusive days."""
        where, args = conditions((("tenant =", tenant), ("day >=", since), ("day <=", until)), "?")
        sql = (
            f"SELECT tenant, model, day, {', '.join(COUNTS)} FROM usage WHERE {' AND '.join(['1 = 1', *where])}"
            " ORDER BY day, tenant, model"
        )
        return await self.db.read(lambda c: [dict(r) for r in c.execute(sql, args)])


def _add(c: Connection, rows: Mapping[tuple[str, str, str], Mapping[str, int]]) -> None:
    sets = ", ".join(f"{k} = {k} + excluded.{k}" for k in COUNTS)
    sql = (
        f"INSERT INTO usage (tenant, model, day, {', '.join(COUNTS)})"
        f" VALUES (?, ?, ?, {', '.join('?' * len(COUNTS))})"
        f" ON CONFLICT (tenant, day, model) DO UPDATE SET {sets}"
    )
    for (tenant, model, day), counts in rows.items():
        c.execute(sql, (tenant, model, day, *(int(counts.get(k, 0)) for k in COUNTS)))
