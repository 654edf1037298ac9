"""Traces: what one request forwarded and why (summaries, candidates and their scores)."""

from __future__ import annotations

import json
import time
from typing import Any

from .db import Database


class TraceStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def save(self, tenant: str, user: str, session: str, trace: str, data: dict[str, Any]) -> None:
        payload = json.dumps(data, ensure_ascii=False)
        await self.db.write(
            lambda c: c.execute(
                "INSERT OR REPLACE INTO traces (id, tenant, user, session, created, data)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (trace, tenant, user, session, time.time(), payload),
            )
        )

    async def get(self, tenant: str, trace: str) -> dict[str, Any] | None:
        row = await self.db.read(
            lambda c: c.execute(
                "SELECT data FROM traces WHERE tenant = ? AND id = ?", (tenant, trace)
            ).fetchone()
        )
        return None if row is None else dict(json.loads(row[0]))

    async def prune(self, older_than_s: float) -> int:
        cutoff = time.time() - older_than_s
        return int(
            await self.db.write(
                lambda c: c.execute("DELETE FROM traces WHERE created < ?", (cutoff,)).rowcount
            )
        )
