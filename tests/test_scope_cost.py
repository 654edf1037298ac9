"""A new (tenant, user) scope costs kilobytes of database, not megabytes (issue 14, defect 1)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from proxy.store.sqlite import sqlite_migrations as migrations
from proxy.store.sqlite import sqlite_vectors as vector_tables
from proxy.store.sqlite.sqlite_database import Database
from tests.conftest import Proxy

SCOPE_BUDGET_BYTES = 50 * 1024
USERS = 20


def database_bytes(proxy: Proxy, path: Path) -> int:
    proxy.drain()
    assert proxy.server.call(proxy.store.users.checkpoint())
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def test_a_new_user_costs_at_most_50_kb(make_proxy: Callable[..., Proxy], tmp_path: Path) -> None:
    proxy = make_proxy(embedding={"model": "hash:384"})  # the bundled model's dimension
    db = tmp_path / "p.db"

    def one_request_each(users: list[str]) -> None:
        with proxy.http() as http:
            for user in users:
                body = {"model": "m", "messages": [{"role": "user", "content": f"hello, I am {user}"}], "user": user}
                assert http.post("/v1/chat/completions", json=body).status_code == 200

    one_request_each(["warm-up"])  # the tables' first pages
    before = database_bytes(proxy, db)
    one_request_each([f"user-{i}" for i in range(USERS)])
    per_scope = (database_bytes(proxy, db) - before) / USERS
    print(f"new scope: {per_scope / 1024:.1f} KB")
    assert per_scope <= SCOPE_BUDGET_BYTES


def test_old_vector_tables_are_rebuilt_in_small_chunks_with_their_vectors(tmp_path: Path) -> None:
    db = Database(str(tmp_path / "old.db"))
    vectors = np.random.default_rng(1).random((5, 384), dtype=np.float32)

    def old_layout(c: Any) -> None:
        for table in vector_tables.VECTOR_TABLES:
            c.execute(
                f"CREATE VIRTUAL TABLE {table} USING vec0(embedding float[384] distance_metric=cosine,"
                " scope text partition key)"
            )
        for i, v in enumerate(vectors):
            c.execute("INSERT INTO vec_items (rowid, embedding, scope) VALUES (?, ?, ?)", (i + 1, v.tobytes(), f"s{i % 2}"))

    try:
        db.run_sync(old_layout)
        db.run_sync(migrations.apply)
        db.run_sync(lambda c: vector_tables.ensure_vectors(c, 384))
        sql = db.run_sync(lambda c: c.execute("SELECT sql FROM sqlite_master WHERE name = 'vec_items'").fetchone()[0])
        assert f"chunk_size={vector_tables.VECTOR_CHUNK}" in sql
        rows = db.run_sync(lambda c: c.execute("SELECT rowid, embedding, scope FROM vec_items ORDER BY rowid").fetchall())
        assert [(r[0], r[2]) for r in rows] == [(i + 1, f"s{i % 2}") for i in range(5)]
        assert all(np.array_equal(np.frombuffer(r[1], dtype=np.float32), v) for r, v in zip(rows, vectors, strict=True))
        near = db.run_sync(
            lambda c: c.execute(
                "SELECT rowid FROM vec_items WHERE embedding MATCH ? AND k = 1 AND scope = 's0'", (vectors[2].tobytes(),)
            ).fetchall()
        )
        assert [r[0] for r in near] == [3]
    finally:
        db.close()
