"""The vec0 tables that hold vectors, partitioned by scope (tenant + user).

Their shape depends on the embedding model's dimension, so they are made at
start (``ensure_vectors``) rather than by a migration; migration 007 rebuilt
them with small chunks, which ``_create_vectors`` makes from then on.
"""

from __future__ import annotations

import re

from .sqlite_database import Connection

VECTOR_TABLES = ("vec_fragments", "vec_items")
# Vectors a vec0 chunk holds. Each scope (tenant + user) has chunks of its own, allocated
# whole: 8 x 384 floats make a new scope cost ~13 KB a table, not ~1.5 MB. Searches
# in SQLite scan a scope's chunks; requests search the in-memory index instead.
VECTOR_CHUNK = 8


def m007_small_vector_chunks(conn: Connection) -> None:
    """Rebuild the vector tables with ``VECTOR_CHUNK`` rows a chunk instead of vec0's 1,024.

    vec0 allocates a whole chunk for each partition (scope) on its first
    vector: 1,024 x 384 floats, ~1.5 MB a new user. Vectors are copied over as
    they are; the space the old chunks held is reused (or freed by VACUUM).
    """
    for table in VECTOR_TABLES:
        row = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (table,)).fetchone()
        if row is None or f"chunk_size={VECTOR_CHUNK}" in row[0]:
            continue
        dim = re.search(r"float\[(\d+)\]", row[0])
        assert dim is not None, row[0]
        conn.execute(f"CREATE TEMP TABLE moving AS SELECT rowid AS id, embedding, scope FROM {table}")
        conn.execute(f"DROP TABLE {table}")
        _create_vectors(conn, table, int(dim.group(1)))
        conn.execute(f"INSERT INTO {table} (rowid, embedding, scope) SELECT id, embedding, scope FROM moving")
        conn.execute("DROP TABLE moving")


def ensure_vectors(conn: Connection, dim: int) -> None:
    """The vec0 tables depend on the embedding model's dimension, so they are made at start."""
    for table in VECTOR_TABLES:
        row = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (table,)).fetchone()
        if row is not None and f"float[{dim}]" not in row[0]:
            # The model changed: old vectors are meaningless in the new space.
            conn.execute(f"DROP TABLE {table}")
            row = None
        if row is None:
            _create_vectors(conn, table, dim)


def _create_vectors(conn: Connection, table: str, dim: int) -> None:
    conn.execute(
        f"CREATE VIRTUAL TABLE {table} USING vec0(embedding float[{dim}] distance_metric=cosine,"
        f" scope text partition key, chunk_size={VECTOR_CHUNK})"
    )
