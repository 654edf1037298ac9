"""PostgreSQL's vector columns: an ``embedding vector(dim)`` on each vector table, with its HNSW index.

The dimension is the embedding model's, known only at start (``pg_schema.migrate``
fits the columns to it); ``paperclip migrate`` builds the index after a bulk copy.
"""

from __future__ import annotations

from typing import Any

PgConnection = Any

# Tables whose rows carry an embedding of the model's dimension.
VECTOR_TABLES = ("fragments", "items")


async def fit_vectors(conn: PgConnection, dim: int) -> None:
    """An ``embedding vector(dim)`` column with a cosine HNSW index on each vector table.

    The dimension is the embedding model's, known only at start; a model of
    another dimension makes the old vectors meaningless, so they are dropped.
    """
    for table in VECTOR_TABLES:
        cur = await conn.execute(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute"
            " WHERE attrelid = %s::regclass AND attname = 'embedding' AND NOT attisdropped",
            (table,),
        )
        row = await cur.fetchone()
        if row is not None and row[0] == f"vector({dim})":
            continue
        if row is not None:
            await conn.execute(f"ALTER TABLE {table} DROP COLUMN embedding")
        await conn.execute(f"ALTER TABLE {table} ADD COLUMN embedding vector({dim})")
        await index_vectors(conn, table)


async def index_vectors(conn: PgConnection, table: str) -> None:
    """The cosine HNSW index of ``table``'s vectors (a bulk copy drops it and builds it after)."""
    await conn.execute(
        f"CREATE INDEX IF NOT EXISTS {table}_embedding ON {table} USING hnsw (embedding vector_cosine_ops)"
    )
