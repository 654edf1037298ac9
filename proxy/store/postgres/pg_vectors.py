"""PostgreSQL's vector columns: an ``embedding vector(dim)`` on each vector table; HNSW on items only.

The dimension is the embedding model's, known only at start (``pg_schema.migrate``
fits the columns to it); ``paperclip migrate`` builds the index after a bulk copy.

Fragments have no HNSW index. The proxy searches a user's fragments in its
own in-memory index (loaded from the rows); the store's ``knn`` on
fragments serves only the extractor's rare look-up of a superseded item's
source turns, in the background, and ranks the user's rows exactly. Keeping
an HNSW index current costs ~90x the insert (``bench/pg_storage.py``:
69 against 6,259 inserts/s), paid on every request's new fragments for a
search nothing on the request path makes (docs/guide/deployment.md). Items keep
theirs: they are few, written rarely, and searched through the store.
"""

from __future__ import annotations

from typing import Any

PgConnection = Any

# Tables whose rows carry an embedding of the model's dimension.
VECTOR_TABLES = ("fragments", "items")
# Of those, the ones with an HNSW index.
HNSW_TABLES = ("items",)


async def fit_vectors(conn: PgConnection, dim: int) -> None:
    """An ``embedding vector(dim)`` column on each vector table, a cosine HNSW index on ``HNSW_TABLES``.

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
        if table in HNSW_TABLES:
            await index_vectors(conn, table)


async def index_vectors(conn: PgConnection, table: str) -> None:
    """The cosine HNSW index of ``table``'s vectors (a bulk copy drops it and builds it after)."""
    await conn.execute(
        f"CREATE INDEX IF NOT EXISTS {table}_embedding ON {table} USING hnsw (embedding vector_cosine_ops)"
    )
