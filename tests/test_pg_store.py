"""The PostgreSQL database under the store: migrations across replicas, leases, generations, vectors.

Leases are tested on both stores (SQLite's ``SessionStore`` and
PostgreSQL's ``PgLeases``): the compression engine relies on the same
contract from either.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import psycopg
import pytest

from proxy.store import open_store
from proxy.store.lease import held
from proxy.store.postgres import pg_migrations as pg_schema
from proxy.store.postgres import pg_vectors
from proxy.store.postgres.pg_coordination import PgLeases, bump_generation, generation, lock_scope
from proxy.store.postgres.pg_database import PgDatabase, nearest
from proxy.store.postgres.pg_fragments import PgFragmentStore
from proxy.store.records import NewFragment

DIM = 8


class Leases(Protocol):
    async def acquire(self, name: str, owner: str, ttl_s: float) -> bool: ...
    async def release(self, name: str, owner: str) -> None: ...


async def _column_types(url: str) -> dict[str, str]:
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cur = await conn.execute(
            "SELECT c.relname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a"
            " JOIN pg_class c ON c.oid = a.attrelid"
            " WHERE a.attname = 'embedding' AND NOT a.attisdropped"
            " AND c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'"
        )
        return {str(r[0]): str(r[1]) for r in await cur.fetchall()}


async def test_migrations_apply_to_a_blank_database(pg_url: str) -> None:
    db = await PgDatabase.open(pg_url, DIM)
    try:
        async with db.connection() as conn:
            cur = await conn.execute("SELECT name FROM _migrations ORDER BY name")
            names = [r[0] for r in await cur.fetchall()]
            cur = await conn.execute(
                "SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema()"
                " AND indexname LIKE '%%_embedding'"
            )
            indexes = [r[0] for r in await cur.fetchall()]
    finally:
        await db.close()
    assert names == [name for name, _ in pg_schema.MIGRATIONS]
    assert await _column_types(pg_url) == {"fragments": f"vector({DIM})", "items": f"vector({DIM})"}
    assert len(indexes) == 1 and "items USING hnsw (embedding vector_cosine_ops)" in indexes[0]


async def test_two_replicas_starting_together_migrate_once(pg_url: str) -> None:
    conns = [await psycopg.AsyncConnection.connect(pg_url, autocommit=True) for _ in range(3)]
    try:
        applied = await asyncio.gather(*(pg_schema.migrate(c, DIM) for c in conns))
        cur = await conns[0].execute("SELECT name, count(*) FROM _migrations GROUP BY name")
        counts = dict(await cur.fetchall())
    finally:
        for c in conns:
            await c.close()
    everything = [name for name, _ in pg_schema.MIGRATIONS]
    assert sorted(applied) == [[], [], everything]
    assert counts == dict.fromkeys(everything, 1)


async def test_a_model_of_another_dimension_replaces_the_vector_columns(pg_url: str) -> None:
    await (await PgDatabase.open(pg_url, DIM)).close()
    await (await PgDatabase.open(pg_url, 2 * DIM)).close()
    assert await _column_types(pg_url) == {t: f"vector({2 * DIM})" for t in ("fragments", "items")}


@pytest.fixture(params=["sqlite", "postgres"])
async def leases(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Leases]:
    if request.param == "sqlite":
        store = await asyncio.to_thread(open_store, str(tmp_path / "p.db"), DIM)
        yield store.sessions
        store.close()
    else:
        db = await PgDatabase.open(request.getfixturevalue("pg_url"), DIM)
        yield PgLeases(db)
        await db.close()


async def test_of_many_racing_for_a_lease_exactly_one_gets_it(leases: Leases) -> None:
    won = await asyncio.gather(*(leases.acquire("compress:acme:s1", f"r{i}", 30) for i in range(12)))
    assert sum(won) == 1
    winner = f"r{won.index(True)}"
    assert await leases.acquire("compress:acme:s1", winner, 30)  # the holder renews
    assert not await leases.acquire("compress:acme:s1", "late", 30)
    assert await leases.acquire("compress:acme:s2", "late", 30)  # another name is another lease


async def test_a_released_or_expired_lease_is_taken_over(leases: Leases) -> None:
    assert await leases.acquire("job", "a", 30)
    await leases.release("job", "someone-else")  # only the holder releases
    assert not await leases.acquire("job", "b", 30)
    await leases.release("job", "a")
    assert await leases.acquire("job", "b", 1.0)
    assert not await leases.acquire("job", "c", 30)
    await asyncio.sleep(1.1)  # b died without releasing: its lease runs out
    assert await leases.acquire("job", "c", 30)


async def test_a_bump_on_one_replica_is_read_by_another(pg_url: str) -> None:
    one, other = await PgDatabase.open(pg_url, DIM), await PgDatabase.open(pg_url, DIM)
    try:
        async with other.connection() as conn:
            assert await generation(conn, "acme", "u1") == 0
        async with one.transaction() as conn:
            await bump_generation(conn, "acme", "u1")
        with pytest.raises(RuntimeError):
            async with one.transaction() as conn:
                await bump_generation(conn, "acme", "u1")
                raise RuntimeError("the forget failed: its bump must not count")
        async with other.connection() as conn:
            seen = [await generation(conn, t, u) for t, u in (("acme", "u1"), ("acme", "u2"), ("beta", "u1"))]
        assert seen == [1, 0, 0]
    finally:
        await one.close()
        await other.close()


async def _insert_fragments(db: PgDatabase, tenant: str, user: str, vectors: np.ndarray) -> list[int]:
    async with db.transaction() as conn, conn.cursor() as cur:
        await cur.executemany(
            'INSERT INTO fragments (tenant, "user", session, hash, role, text, terms, position,'
            " tokens, created, embedding) VALUES (%s, %s, 's', %s, 'user', 't', 't', %s, 1, 0, %s)"
            " RETURNING id",
            [(tenant, user, f"h{i}", i, vec) for i, vec in enumerate(vectors)],
            returning=True,
        )
        ids = []
        while True:
            row = await cur.fetchone()
            ids.append(int(row[0]))
            if not cur.nextset():
                return ids


def _unit(rng: np.random.Generator, n: int) -> Any:
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


async def test_nearest_is_exact_for_a_user_crowded_out_of_the_hnsw_list(pg_url: str) -> None:
    rng = np.random.default_rng(7)
    db = await PgDatabase.open(pg_url, DIM)
    try:
        await _insert_fragments(db, "acme", "crowd", _unit(rng, 600))
        await _insert_fragments(db, "beta", "u1", _unit(rng, 50))  # same user name, other tenant
        mine = _unit(rng, 30)
        ids = await _insert_fragments(db, "acme", "u1", mine)
        async with db.connection() as conn:  # fragments have none (pg_vectors.HNSW_TABLES): the rule is the table's
            await pg_vectors.index_vectors(conn, "fragments")
            await conn.execute("ANALYZE fragments")
        query = _unit(rng, 1)[0]
        found = await nearest(db, "fragments", "acme", "u1", query, 10)
    finally:
        await db.close()
    sims = mine @ query
    order = np.argsort(-sims)[:10]
    assert [i for i, _ in found] == [ids[j] for j in order]
    assert np.allclose([s for _, s in found], sims[order], atol=1e-5)


async def test_a_held_lease_is_renewed_while_its_work_runs_then_released(leases: Leases) -> None:
    def take(owner: str) -> Any:
        return lambda ttl_s: leases.acquire("compress:acme:s1", owner, ttl_s)

    async with held("compress:acme:s1", take("worker"), lambda: leases.release("compress:acme:s1", "worker"),
                    0.6) as mine:
        assert mine
        async with held("compress:acme:s1", take("other"), lambda: leases.release("compress:acme:s1", "other"),
                        0.6) as theirs:
            assert not theirs
        for _ in range(4):  # 1.6 s: well past the 0.6 s lease, kept by renewals
            await asyncio.sleep(0.4)
            assert not await leases.acquire("compress:acme:s1", "other", 0.6)
    assert await leases.acquire("compress:acme:s1", "other", 0.6)


async def test_a_scopes_fragments_commit_in_id_order(pg_url: str) -> None:
    """An add waits for another writer of the same scope, so ids never commit out of order."""
    db = await PgDatabase.open(pg_url, DIM)
    store = PgFragmentStore(db)
    frag = [NewFragment("h", "user", "t", "t", 0, 1)]
    try:
        async with db.transaction() as other_writer:
            await lock_scope(other_writer, "acme", "u1")
            blocked = asyncio.ensure_future(store.add("acme", "u1", "s", frag, _unit(np.random.default_rng(1), 1)))
            free = await store.add("acme", "u2", "s", frag, _unit(np.random.default_rng(2), 1))
            await asyncio.sleep(0.5)
            assert free == 1 and not blocked.done()  # another user's scope is not held up
        assert await asyncio.wait_for(blocked, 10) == 1
    finally:
        await db.close()
