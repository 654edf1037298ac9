"""Items stored before the memory schema get a category, a standing and an ``about`` on both stores."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from proxy.store.legacy_schema import legacy_schema
from proxy.store.postgres import pg_migrations
from proxy.store.sqlite import sqlite_migrations

# (key, type, source, importance) as the code before stored them → (category, standing, about).
OLD_ROWS: list[tuple[tuple[str, str, str, float], tuple[str, bool, str]]] = [
    (("user.allergy.peanut", "entity", "user-stated", 0.9), ("health", True, "user")),
    (("user.diet", "constraint", "user-stated", 0.9), ("health", True, "user")),
    (("user.cat.allergy.peanut", "entity", "user-stated", 0.9), ("relationship", True, "the user's cat")),
    (("user.dog.name", "entity", "user-stated", 0.7), ("relationship", True, "the user's dog")),
    (("user.name", "entity", "user-stated", 0.8), ("identity", True, "user")),
    (("user.location.home", "entity", "user-stated", 0.6), ("identity", True, "user")),
    (("user.location.current", "event", "user-stated", 0.4), ("plan", False, "user")),
    (("user.preference.spicy_food", "preference", "user-stated", 0.6), ("preference", True, "user")),
    (("user.preference.blue", "preference", "user-stated", 0.3), ("preference", False, "user")),
    (("user.preference.tea", "preference", "inferred", 0.6), ("preference", False, "user")),
    (("user.card.8865", "entity", "user-stated", 0.6), ("identifier", False, "user")),
    (("user.order.a12345", "entity", "user-stated", 0.6), ("identifier", False, "user")),
    (("user.deadline.delivery", "constraint", "user-stated", 0.8), ("plan", True, "user")),
    (("user.task.call_dentist", "task", "user-stated", 0.7), ("task", True, "user")),
    (("user.event.auto_1a2b3c", "event", "inferred", 0.5), ("plan", False, "user")),
    (("user.entity.auto_9f8e7d", "entity", "user-stated", 0.9), ("other", False, "user")),
]


@pytest.mark.parametrize(("row", "expected"), OLD_ROWS)
def test_the_mapping_reads_the_old_conventions(row: tuple[str, str, str, float], expected: tuple[str, bool, str]) -> None:
    assert tuple(legacy_schema(*row)) == expected


def _before(names: list[str], new: str) -> int:
    return names.index(new)


def test_sqlite_fills_the_schema_of_rows_stored_before_it(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "old.db", isolation_level=None)
    conn.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied REAL NOT NULL)")
    names = [name for name, _ in sqlite_migrations.MIGRATIONS]
    for name, fn in sqlite_migrations.MIGRATIONS[: _before(names, "012_item_schema")]:
        fn(conn)  # type: ignore[arg-type]
        conn.execute("INSERT INTO _migrations VALUES (?, 0)", (name,))
    for (key, kind, source, importance), _ in OLD_ROWS:
        conn.execute(
            "INSERT INTO items (tenant, user, type, key, content, terms, importance, confidence, source,"
            " created, updated) VALUES ('t', 'u', ?, ?, 'c', 'c', ?, 1, ?, 0, 0)",
            (kind, key, importance, source),
        )
    assert sqlite_migrations.apply(conn) == names[_before(names, "012_item_schema"):]  # type: ignore[arg-type]
    got = conn.execute("SELECT category, standing, about FROM items ORDER BY id").fetchall()
    conn.close()
    assert [(c, bool(s), a) for c, s, a in got] == [expected for _, expected in OLD_ROWS]


async def test_postgres_fills_the_schema_of_rows_stored_before_it(pg_url: str) -> None:
    names = [name for name, _ in pg_migrations.MIGRATIONS]
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        await conn.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied DOUBLE PRECISION NOT NULL)")
        for name, fn in pg_migrations.MIGRATIONS[: _before(names, "013_item_schema")]:
            async with conn.transaction():
                await fn(conn)
                await conn.execute("INSERT INTO _migrations VALUES (%s, %s)", (name, time.time()))
        for (key, kind, source, importance), _ in OLD_ROWS:
            await conn.execute(
                'INSERT INTO items (tenant, "user", type, key, content, terms, importance, confidence, source,'
                " created, updated) VALUES ('t', 'u', %s, %s, 'c', 'c', %s, 1, %s, 0, 0)",
                (kind, key, importance, source),
            )
        assert await pg_migrations.migrate(conn, None) == names[_before(names, "013_item_schema"):]
        cur = await conn.execute("SELECT category, standing, about FROM items ORDER BY id")
        got: list[Any] = await cur.fetchall()
    assert [(c, bool(s), a) for c, s, a in got] == [expected for _, expected in OLD_ROWS]
