"""Fragments: every user/assistant message seen, once per (tenant, user, content hash).

Vectors live in the ``vec_fragments`` vec0 table, partitioned by scope
(tenant + user) so a KNN search only ever scans that user's vectors; the
row's ``terms`` (the BM25 tokens, space-joined) let an in-memory BM25 index
be rebuilt without re-tokenising.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .db import Connection, Database


def scope_of(tenant: str, user: str) -> str:
    return f"{tenant}\x1f{user}"


@dataclass(frozen=True)
class NewFragment:
    hash: str
    role: str
    text: str
    terms: str
    position: int
    tokens: int


@dataclass(frozen=True)
class Fragment:
    id: int
    session: str
    hash: str
    role: str
    text: str
    position: int
    tokens: int
    created: float


class FragmentStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def known(self, tenant: str, user: str, hashes: Sequence[str]) -> set[str]:
        if not hashes:
            return set()

        def read(c: Connection) -> set[str]:
            found: set[str] = set()
            for i in range(0, len(hashes), 500):
                part = hashes[i : i + 500]
                marks = ",".join("?" * len(part))
                rows = c.execute(
                    f"SELECT hash FROM fragments WHERE tenant = ? AND user = ? AND hash IN ({marks})",
                    (tenant, user, *part),
                ).fetchall()
                found.update(r[0] for r in rows)
            return found

        return await self.db.read(read)

    async def add(
        self,
        tenant: str,
        user: str,
        session: str,
        fragments: Sequence[NewFragment],
        vectors: np.ndarray,
        created: float | None = None,
    ) -> int:
        """Insert fragments not yet known, with their vectors; returns how many were new."""
        now = time.time() if created is None else created
        scope = scope_of(tenant, user)

        def write(c: Connection) -> int:
            added = 0
            for frag, vec in zip(fragments, vectors, strict=True):
                cur = c.execute(
                    "INSERT OR IGNORE INTO fragments (tenant, user, session, hash, role, text, terms,"
                    " position, tokens, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (tenant, user, session, frag.hash, frag.role, frag.text, frag.terms,
                     frag.position, frag.tokens, now),
                )
                if cur.rowcount:
                    c.execute(
                        "INSERT INTO vec_fragments (rowid, embedding, scope) VALUES (?, ?, ?)",
                        (cur.lastrowid, np.asarray(vec, dtype=np.float32).tobytes(), scope),
                    )
                    added += 1
            return added

        return await self.db.write(write)

    async def knn(self, tenant: str, user: str, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        """(fragment id, cosine similarity), nearest first."""
        blob = np.asarray(vector, dtype=np.float32).tobytes()
        rows = await self.db.read(
            lambda c: c.execute(
                "SELECT rowid, distance FROM vec_fragments WHERE embedding MATCH ? AND k = ? AND scope = ?",
                (blob, k, scope_of(tenant, user)),
            ).fetchall()
        )
        return [(int(r[0]), 1.0 - float(r[1])) for r in rows]

    async def vectors(self, ids: Sequence[int]) -> dict[int, np.ndarray]:
        if not ids:
            return {}

        def read(c: Connection) -> dict[int, np.ndarray]:
            marks = ",".join("?" * len(ids))
            rows = c.execute(
                f"SELECT rowid, embedding FROM vec_fragments WHERE rowid IN ({marks})", tuple(ids)
            ).fetchall()
            return {int(r[0]): np.frombuffer(r[1], dtype=np.float32) for r in rows}

        return await self.db.read(read)

    async def terms_since(self, tenant: str, user: str, after_id: int) -> list[tuple[int, str]]:
        return await self.db.read(
            lambda c: [
                (int(r[0]), str(r[1]))
                for r in c.execute(
                    "SELECT id, terms FROM fragments WHERE tenant = ? AND user = ? AND id > ?"
                    " AND status = 'active' ORDER BY id",
                    (tenant, user, after_id),
                )
            ]
        )

    async def terms_and_vectors_since(
        self, tenant: str, user: str, after_id: int, limit: int
    ) -> list[tuple[int, str, np.ndarray]]:
        """(id, terms, vector) of the user's active fragments with id > ``after_id``, by id, at most ``limit``."""

        def read(c: Connection) -> list[tuple[int, str, np.ndarray]]:
            rows = c.execute(
                "SELECT f.id, f.terms, v.embedding FROM fragments f JOIN vec_fragments v ON v.rowid = f.id"
                " WHERE f.tenant = ? AND f.user = ? AND f.id > ? AND f.status = 'active'"
                " ORDER BY f.id LIMIT ?",
                (tenant, user, after_id, limit),
            ).fetchall()
            return [(int(r[0]), str(r[1]), np.frombuffer(r[2], dtype=np.float32)) for r in rows]

        return await self.db.read(read)

    async def get(self, tenant: str, user: str, ids: Sequence[int]) -> dict[int, Fragment]:
        if not ids:
            return {}

        def read(c: Connection) -> dict[int, Fragment]:
            marks = ",".join("?" * len(ids))
            rows = c.execute(
                "SELECT id, session, hash, role, text, position, tokens, created FROM fragments"
                f" WHERE tenant = ? AND user = ? AND status = 'active' AND id IN ({marks})",
                (tenant, user, *ids),
            ).fetchall()
            return {int(r["id"]): _fragment(r) for r in rows}

        return await self.db.read(read)

    async def created_between(
        self, tenant: str, user: str, start: float, end: float, limit: int
    ) -> list[int]:
        """Ids of the user's active fragments created in [start, end] (epoch seconds), oldest first."""
        return await self.db.read(
            lambda c: [
                int(r[0])
                for r in c.execute(
                    "SELECT id FROM fragments WHERE tenant = ? AND user = ? AND created BETWEEN ? AND ?"
                    " AND status = 'active' ORDER BY id LIMIT ?",
                    (tenant, user, start, end, limit),
                )
            ]
        )

    async def around(
        self, tenant: str, user: str, session: str, low: int, high: int
    ) -> list[Fragment]:
        """The session's fragments with positions in [low, high], in order."""
        return await self.db.read(
            lambda c: [
                _fragment(r)
                for r in c.execute(
                    "SELECT id, session, hash, role, text, position, tokens, created FROM fragments"
                    " WHERE tenant = ? AND user = ? AND session = ? AND position BETWEEN ? AND ?"
                    " AND status = 'active' ORDER BY position",
                    (tenant, user, session, low, high),
                )
            ]
        )

    async def suppress(self, tenant: str, user: str, hashes: Sequence[str]) -> None:
        """Mark fragments as never to be injected again (their fact was superseded)."""
        if not hashes:
            return

        def write(c: Connection) -> None:
            marks = ",".join("?" * len(hashes))
            c.execute(
                f"UPDATE fragments SET status = 'superseded' WHERE tenant = ? AND user = ?"
                f" AND hash IN ({marks})",
                (tenant, user, *hashes),
            )

        await self.db.write(write)

    async def count(self, tenant: str, user: str) -> int:
        row = await self.db.read(
            lambda c: c.execute(
                "SELECT count(*) FROM fragments WHERE tenant = ? AND user = ?", (tenant, user)
            ).fetchone()
        )
        return int(row[0])


def _fragment(r: Any) -> Fragment:
    return Fragment(
        int(r["id"]), r["session"], r["hash"], r["role"], r["text"], int(r["position"]),
        int(r["tokens"]), float(r["created"]),
    )
