"""Traces: what one request forwarded and why (summaries, candidates and their scores)."""

from __future__ import annotations

import json
import time
from typing import Any

from ..filters import conditions
from .sqlite_database import Database


class TraceStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def save(self, tenant: str, user: str, session: str, trace: str, data: dict[str, Any]) -> None:
        # Serialised on the writer's thread, not the event loop: a trace is tens of kB.
        await self.db.write(
            lambda c: c.execute(
                "INSERT OR REPLACE INTO traces (id, tenant, user, session, created, data)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (trace, tenant, user, session, time.time(), json.dumps(data, ensure_ascii=False)),
            )
        )

    async def get(self, tenant: str, trace: str) -> dict[str, Any] | None:
        row = await self.db.read(
            lambda c: c.execute(
                "SELECT data FROM traces WHERE tenant = ? AND id = ?", (tenant, trace)
            ).fetchone()
        )
        return None if row is None else dict(json.loads(row[0]))

    async def recent(
        self, tenant: str, *, user: str | None = None, session: str | None = None,
        degraded: bool | None = None, after: str | None = None, limit: int = 20,
    ) -> list[dict[str, Any]]:
        """The tenant's traces, newest first, after the trace ``after``; filters narrow them."""
        where, args = conditions((("tenant =", tenant), ("user =", user), ("session =", session)), "?")
        if degraded is not None:
            where.append(f"json_extract(data, '$.degraded') IS {'NOT ' if degraded else ''}NULL")
        if after is not None:
            # Keyset: strictly older than the cursor row, ties broken by id.
            where.append("(created, id) < (SELECT created, id FROM traces WHERE tenant = ? AND id = ?)")
            args += [tenant, after]
        sql = (
            "SELECT id, user, session, created, data FROM traces WHERE " + " AND ".join(where)
            + " ORDER BY created DESC, id DESC LIMIT ?"
        )
        rows = await self.db.read(lambda c: c.execute(sql, (*args, limit)).fetchall())
        return [trace_summary(r) for r in rows]

    async def prune(self, older_than_s: float) -> int:
        cutoff = time.time() - older_than_s
        return int(
            await self.db.write(
                lambda c: c.execute("DELETE FROM traces WHERE created < ?", (cutoff,)).rowcount
            )
        )


def trace_summary(row: Any) -> dict[str, Any]:
    """A trace as a list shows it: who, when, tokens and counts, not its candidates."""
    data = json.loads(row["data"])
    return {
        "id": row["id"], "object": "paperclip.trace", "user": row["user"], "session": row["session"],
        "created": row["created"], "tokens_in": data.get("tokens_in"),
        "tokens_forwarded": data.get("tokens_forwarded"), "degraded": data.get("degraded"),
        "query": data.get("query"), "candidates": len(data.get("candidates") or []),
        "injected": len(data.get("injected") or []), "summaries": len(data.get("summaries") or []),
    }
