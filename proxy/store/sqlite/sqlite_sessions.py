"""Session state: compressed prefixes keyed by chain hash, their summaries, and leases."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from ..records import EMPTY, PrefixState, SummaryRow
from .sqlite_database import Connection, Database


class SessionStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def longest_prefix(self, tenant: str, session: str, chain: Sequence[str]) -> PrefixState:
        """Match the session's stored prefixes against the incoming chain hashes.

        Branches (an edited or regenerated turn) simply match a shorter prefix,
        or none: each history only ever gets the summaries of its own messages.
        """
        def read(c: Connection) -> PrefixState:
            rows = c.execute(
                "SELECT chain_hash, upto, summary_ids FROM prefixes WHERE tenant = ? AND session = ?",
                (tenant, session),
            ).fetchall()
            best = best_prefix([(r["chain_hash"], r["upto"], r["summary_ids"]) for r in rows], chain)
            if best is None:
                return EMPTY
            ids = json.loads(best[2])
            return prefix_state(best, ids, {r.id: r for r in _summaries(c, tenant, ids)})

        return await self.db.read(read, quick=True)  # one call: the summaries are read in the same hop

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

        def write(c: Connection) -> None:
            for s in new:
                c.execute(
                    "INSERT OR IGNORE INTO summaries (id, tenant, user, session, level, text, tokens,"
                    " start, end, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (s.id, tenant, user, session, s.level, s.text, s.tokens, s.start, s.end, now),
                )
            c.execute(
                "INSERT OR REPLACE INTO prefixes (tenant, session, user, chain_hash, upto,"
                " summary_ids, created) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (tenant, session, user, chain_hash, upto, json.dumps([s.id for s in chain]), now),
            )

        await self.db.write(write)

    async def describe(self, tenant: str, session: str) -> dict[str, Any] | None:
        def read(c: Connection) -> dict[str, Any] | None:
            prefixes = c.execute(
                "SELECT chain_hash, upto, summary_ids, created, user FROM prefixes"
                " WHERE tenant = ? AND session = ? ORDER BY upto",
                (tenant, session),
            ).fetchall()
            summaries = c.execute(
                "SELECT id, level, text, tokens, start, end, created FROM summaries"
                " WHERE tenant = ? AND session = ? ORDER BY start, level",
                (tenant, session),
            ).fetchall()
            return describe_session(session, prefixes, [dict(s) for s in summaries])

        return await self.db.read(read)

    async def acquire(self, name: str, owner: str, ttl_s: float) -> bool:
        """Take a lease (holds across processes sharing the database file)."""
        now = time.time()

        def write(c: Connection) -> bool:
            c.execute(
                "INSERT INTO locks (name, owner, expires) VALUES (?, ?, ?)"
                " ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expires = excluded.expires"
                " WHERE locks.expires < ? OR locks.owner = excluded.owner",
                (name, owner, now + ttl_s, now),
            )
            row = c.execute("SELECT owner FROM locks WHERE name = ?", (name,)).fetchone()
            return bool(row is not None and row[0] == owner)

        return await self.db.write(write)

    async def release(self, name: str, owner: str) -> None:
        await self.db.write(
            lambda c: c.execute("DELETE FROM locks WHERE name = ? AND owner = ?", (name, owner))
        )


def best_prefix(rows: Sequence[tuple[str, int, str]], chain: Sequence[str]) -> tuple[str, int, str] | None:
    """Of stored (chain_hash, upto, summary_ids) rows, the longest prefix the chain starts with."""
    matching = [r for r in rows if 0 < r[1] <= len(chain) and chain[r[1] - 1] == r[0]]
    return max(matching, key=lambda r: r[1], default=None)


def prefix_state(best: tuple[str, int, str], ids: Sequence[str], found: dict[str, SummaryRow]) -> PrefixState:
    """The prefix ``best`` with its summaries ``ids`` in order, from those ``found`` by id."""
    if any(i not in found for i in ids):
        return EMPTY  # a summary was deleted (forget): treat the prefix as gone
    return PrefixState(best[1], best[0], tuple(found[i] for i in ids))


def describe_session(
    session: str, prefixes: Sequence[Any], summaries: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """The inspector's view of a session's rows (prefixes by ``upto``), or None when it has none."""
    if not prefixes and not summaries:
        return None
    return {
        "session": session,
        "prefixes": [
            {
                "chain_hash": p["chain_hash"],
                "upto": p["upto"],
                "summary_ids": json.loads(p["summary_ids"]),
                "created": p["created"],
            }
            for p in prefixes
        ],
        "watermark": max(p["upto"] for p in prefixes) if prefixes else 0,
        "summaries": summaries,
    }


def _summaries(c: Connection, tenant: str, ids: Sequence[str]) -> list[SummaryRow]:
    if not ids:
        return []
    marks = ",".join("?" * len(ids))
    rows = c.execute(
        f"SELECT id, level, text, tokens, start, end FROM summaries WHERE tenant = ? AND id IN ({marks})",
        (tenant, *ids),
    ).fetchall()
    return [SummaryRow(r["id"], r["level"], r["text"], r["tokens"], r["start"], r["end"]) for r in rows]
