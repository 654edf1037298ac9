"""Which session produced each Responses API response, so a ``previous_response_id`` chain stays one session.

A client that lets the provider hold the conversation sends only its new
items and the id of the last response. The id maps to the session and to how
many of the session's conversation messages came before the next request
(``upto``), so the chain's turns keep their positions and their session.
The provider holds those ``upto`` turns when it is sent the next request,
so recall leaves them out (``RecallRequest.held``); a sibling branch's turns,
recorded at positions past it, are still recalled.
"""

from __future__ import annotations

import time

from ..records import ResponseSession
from .sqlite_database import Database


class ResponseSessionStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def save(self, tenant: str, user: str, response_id: str, session: str, upto: int) -> None:
        await self.db.write(
            lambda c: c.execute(
                "INSERT OR REPLACE INTO response_sessions (tenant, response_id, user, session, upto, created)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (tenant, response_id, user, session, upto, time.time()),
            )
        )

    async def find(self, tenant: str, response_id: str) -> ResponseSession | None:
        row = await self.db.read(
            lambda c: c.execute(
                "SELECT session, upto FROM response_sessions WHERE tenant = ? AND response_id = ?",
                (tenant, response_id),
            ).fetchone()
        )
        return None if row is None else ResponseSession(str(row[0]), int(row[1]))
