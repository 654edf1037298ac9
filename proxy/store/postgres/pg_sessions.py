"""Session state on PostgreSQL: the same contract as ``sqlite_sessions.SessionStore``.

Rows and matching rules are SQLite's (prefixes keyed by chain hash, their
summaries); leases come from ``coordination.PgLeases``, on the database's
clock, so the compression of a range is done by one replica at a time.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from psycopg.rows import dict_row

from ..records import EMPTY, PrefixState, SummaryRow
from ..sqlite.sqlite_sessions import best_prefix, describe_session, prefix_state
from .pg_coordination import PgLeases
from .pg_database import PgDatabase

_SUMMARY = 'id, level, text, tokens, start, "end"'


class PgSessionStore:
    def __init__(self, db: PgDatabase) -> None:
        self.db = db
        self._leases = PgLeases(db)

    async def longest_prefix(self, tenant: str, session: str, chain: Sequence[str]) -> PrefixState:
        """The longest stored prefix the chain starts with (see ``SessionStore.longest_prefix``)."""
        async with self.db.connection() as conn:
            cur = await conn.execute(
                "SELECT chain_hash, upto, summary_ids FROM prefixes WHERE tenant = %s AND session = %s"
                " AND upto BETWEEN 1 AND %s ORDER BY upto DESC",
                (tenant, session, len(chain)),
            )
            best = best_prefix([(str(r[0]), int(r[1]), str(r[2])) for r in await cur.fetchall()], chain)
            if best is None:
                return EMPTY
            ids = json.loads(best[2])
            cur = await conn.execute(
                f"SELECT {_SUMMARY} FROM summaries WHERE tenant = %s AND id = ANY(%s)", (tenant, ids)
            )
            found = {r[0]: SummaryRow(*r) for r in await cur.fetchall()}
        return prefix_state(best, ids, found)

    async def save_prefix(
        self,
        tenant: str,
        user: str,
        session: str,
        chain_hash: str,
        upto: int,
        chain: Sequence[SummaryRow],
        new: Sequence[SummaryRow],
    ) -> None:
        """Store new summaries and the prefix they (with older ones) now represent, atomically."""
        now = time.time()
        async with self.db.transaction() as conn:
            async with conn.cursor() as cur:
                await cur.executemany(
                    'INSERT INTO summaries (id, tenant, "user", session, level, text, tokens, start,'
                    ' "end", created) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)'
                    " ON CONFLICT DO NOTHING",
                    [(s.id, tenant, user, session, s.level, s.text, s.tokens, s.start, s.end, now)
                     for s in new],
                )
            await conn.execute(
                'INSERT INTO prefixes (tenant, session, "user", chain_hash, upto, summary_ids, created)'
                " VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (tenant, session, chain_hash)"
                ' DO UPDATE SET "user" = excluded."user", upto = excluded.upto,'
                " summary_ids = excluded.summary_ids, created = excluded.created",
                (tenant, session, user, chain_hash, upto, json.dumps([s.id for s in chain]), now),
            )

    async def describe(self, tenant: str, session: str) -> dict[str, Any] | None:
        async with self.db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(
                'SELECT chain_hash, upto, summary_ids, created, "user" FROM prefixes'
                " WHERE tenant = %s AND session = %s ORDER BY upto",
                (tenant, session),
            )
            prefixes = await cur.fetchall()
            await cur.execute(
                f"SELECT {_SUMMARY}, created FROM summaries WHERE tenant = %s AND session = %s"
                " ORDER BY start, level",
                (tenant, session),
            )
            summaries = await cur.fetchall()
        return describe_session(session, prefixes, summaries)

    async def acquire(self, name: str, owner: str, ttl_s: float) -> bool:
        return await self._leases.acquire(name, owner, ttl_s)

    async def release(self, name: str, owner: str) -> None:
        await self._leases.release(name, owner)
