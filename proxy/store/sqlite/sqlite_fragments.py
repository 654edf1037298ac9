"""Fragments: every user/assistant message seen, once per (tenant, user, content hash).

Vectors live in the ``vec_fragments`` vec0 table, partitioned by scope
(tenant + user) so a KNN search only ever scans that user's vectors; the
row's ``terms`` (the BM25 tokens, space-joined) let an in-memory BM25 index
be rebuilt without re-tokenising.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..forgetting import replies_to
from ..records import Fragment, Loaded, NewFragment, generation_key, scope_of
from .sqlite_database import Connection, Database


class FragmentStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def known(self, tenant: str, user: str, hashes: Sequence[str], session: str | None = None) -> set[str]:
        """Which of ``hashes`` the user's fragments hold, or ``session`` held before they were purged."""
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
                if session is not None:
                    rows = c.execute(
                        "SELECT hash FROM forgotten_turns WHERE tenant = ? AND user = ? AND session = ?"
                        f" AND hash IN ({marks})",
                        (tenant, user, session, *part),
                    ).fetchall()
                    found.update(r[0] for r in rows)
            return found

        return await self.db.read(read)  # not quick: its hashes grow with the chat

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
                else:  # said before in another session: this one said it too (``forgetting.SIGHTINGS``)
                    c.execute(
                        "INSERT OR IGNORE INTO fragment_sightings (tenant, user, hash, session, position)"
                        " SELECT ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM fragments WHERE tenant = ? AND user = ?"
                        " AND hash = ? AND session != ?)",
                        (tenant, user, frag.hash, session, frag.position, tenant, user, frag.hash, session),
                    )
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

    async def sources(self, tenant: str, user: str, ids: Sequence[int]) -> dict[int, tuple[str, str, str]]:
        """(hash, session, role) of the user's active fragments ``ids``."""
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        rows = await self.db.read(
            lambda c: c.execute(
                f"SELECT id, hash, session, role FROM fragments WHERE tenant = ? AND user = ?"
                f" AND status = 'active' AND id IN ({marks})",
                (tenant, user, *ids),
            ).fetchall(),
            quick=True,
        )
        return {int(r[0]): (str(r[1]), str(r[2]), str(r[3])) for r in rows}

    async def suppress(self, tenant: str, user: str, hashes: Sequence[str]) -> None:
        await self.db.write(lambda c: suppress(c, tenant, user, hashes))

    async def replies(self, tenant: str, user: str, hashes: Sequence[str]) -> list[tuple[str, str]]:
        """(hash, text) of the assistant's active replies right after the user's turns with ``hashes``
        (``forgetting.replies_to``)."""
        if not hashes:
            return []
        turns = await self.db.read(lambda c: source_turns(c, tenant, user, hashes))
        said = set(hashes)
        return [(str(t["hash"]), str(t["text"])) for t in turns if t["hash"] not in said and t["status"] == "active"]

    async def load_since(
        self, tenant: str, user: str, after_id: int, limit: int
    ) -> tuple[int, list[Loaded]]:
        """The scope's generation, and its active fragments with id > ``after_id``, by id, at most ``limit``.

        The generation changes whenever the scope loses fragments or one
        stops being active (``bump_generation``): an index in memory that
        saw another generation must be rebuilt.
        """

        # The limit is written into the statement, not bound: SQLite built with STAT4 (sqlean's) plans
        # with a bound LIMIT's value, so binding one prepares the statement again on every call (~20 µs
        # for this join, twice that under load, on every request's search). One limit, one cached statement.
        sql = (
            "SELECT f.id, f.session, f.hash, f.role, f.text, f.position, f.tokens, f.created,"
            " f.terms, v.embedding FROM fragments f JOIN vec_fragments v ON v.rowid = f.id"
            " WHERE f.tenant = ? AND f.user = ? AND f.id > ? AND f.status = 'active'"
            f" ORDER BY f.id LIMIT {int(limit)}"
        )

        def read(c: Connection) -> tuple[int, list[Loaded]]:
            found = c.execute(
                "SELECT generation FROM scope_generations WHERE scope = ?", (generation_key(tenant, user),)
            ).fetchone()
            rows = c.execute(sql, (tenant, user, after_id)).fetchall()
            sessions: dict[str, str] = {}  # one string object per session, not per row
            loaded = [
                Loaded(
                    Fragment(int(r[0]), sessions.setdefault(r[1], r[1]), r[2], r[3], r[4], int(r[5]),
                             int(r[6]), float(r[7])),
                    str(r[8]),
                    np.frombuffer(r[9], dtype=np.float32),
                )
                for r in rows
            ]
            return (int(found[0]) if found else 0), loaded

        return await self.db.read(read, quick=True)

    async def active_ids(self, tenant: str, user: str) -> set[int]:
        return await self.db.read(
            lambda c: {
                int(r[0])
                for r in c.execute(
                    "SELECT id FROM fragments WHERE tenant = ? AND user = ? AND status = 'active'",
                    (tenant, user),
                )
            }
        )

    async def count(self, tenant: str, user: str) -> int:
        row = await self.db.read(
            lambda c: c.execute(
                "SELECT count(*) FROM fragments WHERE tenant = ? AND user = ?", (tenant, user)
            ).fetchone()
        )
        return int(row[0])


def suppress(c: Connection, tenant: str, user: str, hashes: Sequence[str]) -> None:
    """Mark fragments as never to be injected again (their fact was superseded)."""
    if not hashes:
        return
    rows_in(c, "UPDATE fragments SET status = 'superseded' WHERE tenant = ? AND user = ? AND hash IN", hashes,
            (tenant, user))
    bump_generation(c, tenant, user)


TURN = "id, session, hash, position, role, text, status"  # the columns ``source_turns`` reads
_BATCH = 500


def source_turns(c: Connection, tenant: str, user: str, hashes: Sequence[str]) -> list[Any]:
    """The user's fragments with ``hashes``, and the assistant's reply right after each user turn."""
    turns = rows_in(c, f"SELECT {TURN} FROM fragments WHERE tenant = ? AND user = ? AND hash IN", hashes, (tenant, user))
    after: dict[tuple[str, int], tuple[int, str]] = {}
    for t in turns:
        nxt = c.execute(
            "SELECT id, role FROM fragments WHERE tenant = ? AND session = ? AND position = ? AND user = ?",
            (tenant, t["session"], t["position"] + 1, user),
        ).fetchone()
        if nxt is not None:
            after[(t["session"], t["position"] + 1)] = (int(nxt[0]), str(nxt[1]))
    seen = set(ids_of(turns))
    replies = [i for i in replies_to(((t["session"], t["position"], t["role"]) for t in turns), after)
               if i not in seen]
    return [*turns, *rows_in(c, f"SELECT {TURN} FROM fragments WHERE tenant = ? AND user = ? AND id IN",
                         replies, (tenant, user))]


def rows_in(c: Connection, sql: str, values: Sequence[Any], before: tuple[Any, ...] = ()) -> list[Any]:
    """``sql`` ending in ``IN`` run over ``values`` in batches; the rows it returns, if any."""
    out: list[Any] = []
    for i in range(0, len(values), _BATCH):
        part = list(values[i : i + _BATCH])
        out += c.execute(f"{sql} ({','.join('?' * len(part))})", (*before, *part)).fetchall()
    return out


def ids_of(rows: Iterable[Any]) -> list[int]:
    return [int(r["id"]) for r in rows]


def bump_generation(c: Connection, tenant: str, user: str) -> None:
    """Tell every process's in-memory index of this scope to rebuild (it lost or hid fragments)."""
    c.execute(
        "INSERT INTO scope_generations (scope, generation) VALUES (?, 1)"
        " ON CONFLICT (scope) DO UPDATE SET generation = generation + 1",
        (generation_key(tenant, user),),
    )


