"""Copying a SQLite deployment into PostgreSQL (``paperclip migrate``): resumable, then counted.

Tables are copied in order, each in batches by SQLite rowid; a batch's rows
and the progress mark (``transfer_progress``) commit together, so an
interrupted copy re-run starts after the last batch committed, and a batch
is never copied twice. Ids are kept (items point at their successors by
id), vectors travel with their rows, and each scope's generation comes
along. At the end every table's rows are counted on both sides.

Rows changed in SQLite after their batch was copied are not copied again:
stop the SQLite proxy (or re-run ``migrate`` after it stopped) before
pointing replicas at PostgreSQL (docs/guide/deployment.md).
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .postgres import pg_vectors
from .postgres.pg_database import PgConnection, PgDatabase
from .sqlite.sqlite_database import Connection, connect

BATCH = 500

# (table, its vector table or None). Leases (``locks``) are transient and stay behind.
TABLES: tuple[tuple[str, str | None], ...] = (
    ("fragments", "vec_fragments"),
    ("items", "vec_items"),
    ("item_events", None),
    ("summaries", None),
    ("prefixes", None),
    ("extraction_cursors", None),
    ("traces", None),
    ("scope_generations", None),
    ("usage", None),
    ("response_sessions", None),
    ("forgotten_turns", None),
    ("fragment_sightings", None),
)
# Tables whose ids PostgreSQL draws from a sequence: new rows continue after the copied ids.
SERIAL_TABLES = (*pg_vectors.VECTOR_TABLES, "item_events")

Progress = Callable[[str, int, int], None]  # (table, rows copied so far, rows in the source)


@dataclass(frozen=True)
class Count:
    source: int
    target: int

    @property
    def ok(self) -> bool:
        return self.source == self.target


def vector_dimension(c: Connection) -> int:
    row = c.execute("SELECT sql FROM sqlite_master WHERE name = 'vec_fragments'").fetchone()
    found = re.search(r"float\[(\d+)\]", row[0]) if row else None
    if found is None:
        raise ValueError("the source has no vector table: is it a Paperclip database?")
    return int(found.group(1))


async def transfer(
    source_path: str, target_url: str, progress: Progress, batch: int = BATCH
) -> dict[str, Count]:
    """Copy every table not yet copied, then count rows on both sides."""
    src = await asyncio.to_thread(connect, source_path, readonly=True)
    try:
        db = await PgDatabase.open(target_url, await asyncio.to_thread(vector_dimension, src))
        try:
            origin = await asyncio.to_thread(os.path.abspath, source_path)
            await _drop_indexes_of_empty_tables(db)
            for table, vectors in TABLES:
                await _copy_table(src, db, origin, table, vectors, progress, batch)
            async with db.connection() as conn:
                for table in pg_vectors.HNSW_TABLES:
                    await pg_vectors.index_vectors(conn, table)
                for table in SERIAL_TABLES:
                    await conn.execute(
                        f"SELECT setval(pg_get_serial_sequence('{table}', 'id'),"
                        f" greatest((SELECT max(id) FROM {table}), 1))"
                    )
                return {t: await _count(src, conn, t) for t, _ in TABLES}
        finally:
            await db.close()
    finally:
        src.close()


async def _drop_indexes_of_empty_tables(db: PgDatabase) -> None:
    # Keeping an HNSW index current row by row is ~100x slower than building it once after
    # (docs/guide/deployment.md); a table that already has rows keeps its index (a resumed copy).
    async with db.connection() as conn:
        for table in pg_vectors.HNSW_TABLES:
            cur = await conn.execute(f"SELECT NOT EXISTS (SELECT 1 FROM {table})")
            row = await cur.fetchone()
            if row is not None and row[0]:
                await conn.execute(f"DROP INDEX IF EXISTS {table}_embedding")


async def _copy_table(
    src: Connection, db: PgDatabase, origin: str, table: str, vectors: str | None, progress: Progress,
    batch: int,
) -> None:
    total = await _scalar(src, f"SELECT count(*) FROM {table}")
    columns = await _shared_columns(src, db, table)
    async with db.connection() as conn:
        cur = await conn.execute(
            "SELECT last_rowid FROM transfer_progress WHERE source = %s AND name = %s", (origin, table)
        )
        row = await cur.fetchone()
    last = 0 if row is None else int(row[0])
    done = await _scalar(src, f"SELECT count(*) FROM {table} WHERE rowid <= ?", last)
    progress(table, done, total)
    while True:
        rows = await asyncio.to_thread(_read_batch, src, table, columns, vectors, last, batch)
        if not rows:
            return
        async with db.transaction() as conn:
            await _insert(conn, table, columns, vectors, rows)
            last = int(rows[-1][0])
            await conn.execute(
                "INSERT INTO transfer_progress (source, name, last_rowid) VALUES (%s, %s, %s)"
                " ON CONFLICT (source, name) DO UPDATE SET last_rowid = excluded.last_rowid",
                (origin, table, last),
            )
        done += len(rows)
        progress(table, done, total)


def _read_batch(
    src: Connection, table: str, columns: list[str], vectors: str | None, after: int, batch: int
) -> list[tuple[Any, ...]]:
    cols = ", ".join(f"t.{c}" for c in columns)
    if vectors is None:
        sql = f"SELECT t.rowid, {cols} FROM {table} t WHERE t.rowid > ? ORDER BY t.rowid LIMIT ?"
    else:
        sql = (f"SELECT t.rowid, {cols}, v.embedding FROM {table} t LEFT JOIN {vectors} v"
               f" ON v.rowid = t.id WHERE t.rowid > ? ORDER BY t.rowid LIMIT ?")
    return [tuple(r) for r in src.execute(sql, (after, batch)).fetchall()]


async def _insert(
    conn: PgConnection, table: str, columns: list[str], vectors: str | None, rows: list[tuple[Any, ...]]
) -> None:
    if table == "scope_generations":
        args = [tuple(r[1:]) for r in rows]
        sql = ("INSERT INTO scope_generations (scope, generation) VALUES (%s, %s) ON CONFLICT (scope)"
               " DO UPDATE SET generation = greatest(scope_generations.generation, excluded.generation)")
    else:
        names = [f'"{c}"' for c in columns] + (["embedding"] if vectors else [])
        marks = ", ".join(["%s"] * len(names))
        sql = f"INSERT INTO {table} ({', '.join(names)}) VALUES ({marks}) ON CONFLICT DO NOTHING"
        args = [_pg_row(r[1:], vectors is not None) for r in rows]
    async with conn.cursor() as cur:
        await cur.executemany(sql, args)
    if table == "items":
        # The trigger wrote a 'created' event for each copied item; the source's own history
        # (``item_events``, copied next) is the item's history.
        ids = [r[1 + columns.index("id")] for r in rows]
        await conn.execute("DELETE FROM item_events WHERE item = ANY(%s)", (ids,))


def _pg_row(row: tuple[Any, ...], with_vector: bool) -> tuple[Any, ...]:
    if not with_vector:
        return row
    blob = row[-1]
    return (*row[:-1], None if blob is None else np.frombuffer(blob, dtype=np.float32))


async def _shared_columns(src: Connection, db: PgDatabase, table: str) -> list[str]:
    """The source table's columns that the target has too, in the source's order."""
    info = await asyncio.to_thread(lambda: src.execute(f"PRAGMA table_info({table})").fetchall())
    ours = [str(r[1]) for r in info]
    if table == "scope_generations":
        return ours
    async with db.connection() as conn:
        cur = await conn.execute(
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND table_name = %s", (table,)
        )
        theirs = {str(r[0]) for r in await cur.fetchall()}
    missing = [c for c in ours if c not in theirs]
    if missing:
        raise ValueError(f"{table}: the target has no column {', '.join(missing)}: upgrade it first")
    return ours


async def _count(src: Connection, conn: PgConnection, table: str) -> Count:
    source = await _scalar(src, f"SELECT count(*) FROM {table}")
    cur = await conn.execute(f"SELECT count(*) FROM {table}")
    row = await cur.fetchone()
    return Count(source, int(row[0]))


async def _scalar(src: Connection, sql: str, *args: Any) -> int:
    """One number from the source, read off the event loop."""
    return int(await asyncio.to_thread(lambda: src.execute(sql, args).fetchone()[0]))
