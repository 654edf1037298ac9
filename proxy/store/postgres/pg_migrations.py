"""PostgreSQL's named schema migrations, applied in order, each once, by one replica at a time.

Append new migrations at the end; never edit one that has shipped. The
tables mirror SQLite's (``sqlite_migrations.py``) column for column so that
``paperclip migrate`` copies rows as they are; ``"user"`` and ``"end"`` are
quoted because PostgreSQL reserves them. Every key starts with the tenant,
then the user where the row has one; vectors sit beside their rows and one
user's search filters on (tenant, user).

``migrate`` holds a session advisory lock for the whole run: replicas that
start together queue on it, and the second finds nothing left to do.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from ..legacy_schema import legacy_schema
from ..records import cursor_key
from ..session_names import meant, names, rename, tables
from . import pg_vectors
from .pg_item_history import item_history

PgConnection = Any

# pg_advisory_lock's key: any constant shared by every replica ("paperclip" in ASCII).
MIGRATION_LOCK = 0x7061706572636C69


async def m001_sessions(conn: PgConnection) -> None:
    await _script(conn, """
        CREATE TABLE summaries (
            tenant TEXT NOT NULL,
            id TEXT NOT NULL,
            "user" TEXT NOT NULL,
            session TEXT NOT NULL,
            level INTEGER NOT NULL,
            text TEXT NOT NULL,
            tokens INTEGER NOT NULL,
            start INTEGER NOT NULL,
            "end" INTEGER NOT NULL,
            created DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (tenant, id)
        );
        CREATE INDEX summaries_session ON summaries (tenant, session);
        CREATE INDEX summaries_user ON summaries (tenant, "user");
        CREATE TABLE prefixes (
            tenant TEXT NOT NULL,
            session TEXT NOT NULL,
            "user" TEXT NOT NULL,
            chain_hash TEXT NOT NULL,
            upto INTEGER NOT NULL,
            summary_ids TEXT NOT NULL,
            created DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (tenant, session, chain_hash)
        );
        CREATE INDEX prefixes_user ON prefixes (tenant, "user");
        -- Leases across replicas, expiring on the database's clock (replicas' clocks may differ).
        CREATE TABLE locks (
            name TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            expires TIMESTAMPTZ NOT NULL
        )
    """)


async def m002_fragments(conn: PgConnection) -> None:
    await _script(conn, """
        CREATE TABLE fragments (
            id BIGSERIAL PRIMARY KEY,
            tenant TEXT NOT NULL,
            "user" TEXT NOT NULL,
            session TEXT NOT NULL,
            hash TEXT NOT NULL,
            role TEXT NOT NULL,
            text TEXT NOT NULL,
            terms TEXT NOT NULL,
            position INTEGER NOT NULL,
            tokens INTEGER NOT NULL,
            created DOUBLE PRECISION NOT NULL,
            status TEXT NOT NULL DEFAULT 'active',
            UNIQUE (tenant, "user", hash)
        );
        CREATE INDEX fragments_scope ON fragments (tenant, "user", id);
        CREATE INDEX fragments_session ON fragments (tenant, session, position)
    """)


async def m003_items(conn: PgConnection) -> None:
    await _script(conn, """
        CREATE TABLE items (
            id BIGSERIAL PRIMARY KEY,
            tenant TEXT NOT NULL,
            "user" TEXT NOT NULL,
            session TEXT,
            type TEXT NOT NULL,
            key TEXT NOT NULL,
            content TEXT NOT NULL,
            terms TEXT NOT NULL,
            importance DOUBLE PRECISION NOT NULL,
            confidence DOUBLE PRECISION NOT NULL,
            source TEXT NOT NULL,
            expires_at TEXT,
            status TEXT NOT NULL DEFAULT 'active',
            superseded_by BIGINT,
            turns TEXT NOT NULL DEFAULT '[]',
            fragment_hashes TEXT NOT NULL DEFAULT '[]',
            seen_count INTEGER NOT NULL DEFAULT 1,
            access_count INTEGER NOT NULL DEFAULT 0,
            last_access DOUBLE PRECISION,
            created DOUBLE PRECISION NOT NULL,
            updated DOUBLE PRECISION NOT NULL
        );
        CREATE INDEX items_scope ON items (tenant, "user", status);
        CREATE INDEX items_key ON items (tenant, "user", key);
        CREATE TABLE extraction_cursors (
            tenant TEXT NOT NULL,
            session TEXT NOT NULL,
            upto INTEGER NOT NULL,
            PRIMARY KEY (tenant, session)
        )
    """)


async def m004_traces(conn: PgConnection) -> None:
    await _script(conn, """
        CREATE TABLE traces (
            tenant TEXT NOT NULL,
            id TEXT NOT NULL,
            "user" TEXT NOT NULL,
            session TEXT NOT NULL,
            created DOUBLE PRECISION NOT NULL,
            data TEXT NOT NULL,
            PRIMARY KEY (tenant, id)
        );
        CREATE INDEX traces_user ON traces (tenant, "user");
        CREATE INDEX traces_created ON traces (created);
        -- Bumped in the transaction that removes or hides a scope's rows: every replica's
        -- in-memory index compares it on each search and reloads the scope when it moved.
        CREATE TABLE scope_generations (
            tenant TEXT NOT NULL,
            "user" TEXT NOT NULL,
            generation BIGINT NOT NULL,
            PRIMARY KEY (tenant, "user")
        )
    """)


async def m005_transfer_progress(conn: PgConnection) -> None:
    # ``paperclip migrate``'s progress: per source database and table, the last row copied,
    # committed with the rows themselves so an interrupted copy resumes where it stopped.
    await _script(conn, """
        CREATE TABLE transfer_progress (
            source TEXT NOT NULL,
            name TEXT NOT NULL,
            last_rowid BIGINT NOT NULL,
            PRIMARY KEY (source, name)
        )
    """)


async def m006_item_expiry(conn: PgConnection) -> None:
    # ``expires`` (epoch seconds): ``expires_at`` as the database compares it (the caller computes it).
    await _script(conn, """
        ALTER TABLE items ADD COLUMN expires DOUBLE PRECISION;
        CREATE INDEX items_expires ON items (expires) WHERE expires IS NOT NULL
    """)


async def m007_extraction_claims(conn: PgConnection) -> None:
    # A claim on a session's next turns: who extracts them, and until when (pg_cursors.py).
    await _script(conn, """
        ALTER TABLE extraction_cursors ADD COLUMN owner TEXT;
        ALTER TABLE extraction_cursors ADD COLUMN lease_expires DOUBLE PRECISION
    """)


async def m009_usage_and_listings(conn: PgConnection) -> None:
    # SQLite's m010: usage per tenant, model and UTC day; indexes the admin lists page through.
    await _script(conn, """
        CREATE TABLE usage (
            tenant TEXT NOT NULL,
            model TEXT NOT NULL,
            day TEXT NOT NULL,
            requests BIGINT NOT NULL DEFAULT 0,
            tokens_client BIGINT NOT NULL DEFAULT 0,
            tokens_forwarded BIGINT NOT NULL DEFAULT 0,
            billed_requests BIGINT NOT NULL DEFAULT 0,
            prompt_tokens BIGINT NOT NULL DEFAULT 0,
            completion_tokens BIGINT NOT NULL DEFAULT 0,
            cached_tokens BIGINT NOT NULL DEFAULT 0,
            PRIMARY KEY (tenant, day, model)
        );
        CREATE INDEX traces_recent ON traces (tenant, created, id);
        CREATE INDEX fragments_user_session ON fragments (tenant, "user", session)
    """)


async def m010_hashed_generation_keys(conn: PgConnection) -> None:
    # SQLite's m008: ``scope_generations`` keyed by a digest of the scope (``fragments.generation_key``).
    await _script(conn, """
        CREATE TABLE scope_generations_by_key (scope TEXT PRIMARY KEY, generation BIGINT NOT NULL);
        INSERT INTO scope_generations_by_key (scope, generation)
            SELECT encode(sha256(convert_to(tenant || chr(31) || "user", 'UTF8')), 'hex'), generation
            FROM scope_generations;
        DROP TABLE scope_generations;
        ALTER TABLE scope_generations_by_key RENAME TO scope_generations
    """)


async def m011_response_sessions(conn: PgConnection) -> None:
    # SQLite's m011: a Responses API response id → the session that produced it.
    await _script(conn, """
        CREATE TABLE response_sessions (
            tenant TEXT NOT NULL,
            response_id TEXT NOT NULL,
            "user" TEXT NOT NULL,
            session TEXT NOT NULL,
            upto INTEGER NOT NULL,
            created DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (tenant, response_id)
        );
        CREATE INDEX response_sessions_user ON response_sessions (tenant, "user")
    """)


async def m012_no_hnsw_on_fragments(conn: PgConnection) -> None:
    # Fragments are searched in memory; their HNSW index only slowed every insert (pg_vectors.py).
    await conn.execute("DROP INDEX IF EXISTS fragments_embedding")


async def m013_item_schema(conn: PgConnection) -> None:
    # SQLite's m012: every item's category, standing and about, read for old rows from key and type.
    await _script(conn, """
        ALTER TABLE items ADD COLUMN category TEXT NOT NULL DEFAULT 'other';
        ALTER TABLE items ADD COLUMN standing INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE items ADD COLUMN about TEXT NOT NULL DEFAULT 'user'
    """)
    cur = await conn.execute("SELECT id, key, type, source, importance FROM items")
    rows = await cur.fetchall()
    filled = [legacy_schema(r[1], r[2], r[3], float(r[4])) for r in rows]
    async with conn.cursor() as update:
        await update.executemany(
            "UPDATE items SET category = %s, standing = %s, about = %s WHERE id = %s",
            [(f.category, int(f.standing), f.about, r[0]) for f, r in zip(filled, rows, strict=True)],
        )


async def m014_utf8_session_names(conn: PgConnection) -> None:
    # SQLite's m013: sessions named in UTF-8 but stored as its latin-1 reading get the name meant.
    await _utf8_names(conn, "session")


async def _utf8_names(conn: PgConnection, column: str) -> None:
    # sqlite_migrations._utf8_names: names stored as the latin-1 reading of UTF-8 bytes get the name meant.
    for table in tables(column):
        cur = await conn.execute(names(table, column))
        for (old,) in await cur.fetchall():
            new = meant(old)
            if new is not None:
                await conn.execute(*rename(table, old, new, "%s", column))


async def m015_forgotten_turns(conn: PgConnection) -> None:
    # The digests of purged turns, by session (sqlite_migrations.m014_forgotten_turns).
    await _script(conn, """
        CREATE TABLE forgotten_turns (
            tenant TEXT NOT NULL,
            "user" TEXT NOT NULL,
            session TEXT NOT NULL,
            hash TEXT NOT NULL,
            PRIMARY KEY (tenant, "user", session, hash)
        )
    """)


async def m017_fragment_sightings(conn: PgConnection) -> None:
    # The other sessions that said a stored text, and where (sqlite_migrations.m017_fragment_sightings).
    await _script(conn, """
        CREATE TABLE fragment_sightings (
            tenant TEXT NOT NULL,
            "user" TEXT NOT NULL,
            hash TEXT NOT NULL,
            session TEXT NOT NULL,
            position INTEGER NOT NULL,
            PRIMARY KEY (tenant, "user", hash, session)
        )
    """)


async def m018_cursors_by_user(conn: PgConnection) -> None:
    # sqlite_migrations.m018_cursors_by_user: a session's cursor becomes each of its users'.
    cur = await conn.execute("SELECT tenant, session, upto FROM extraction_cursors")
    for tenant, session, upto in await cur.fetchall():
        owners = await (await conn.execute(
            'SELECT "user" FROM fragments WHERE tenant = %s AND session = %s'
            ' UNION SELECT "user" FROM items WHERE tenant = %s AND session = %s', (tenant, session, tenant, session),
        )).fetchall()
        await conn.execute("DELETE FROM extraction_cursors WHERE tenant = %s AND session = %s", (tenant, session))
        for (user,) in owners:
            await conn.execute(
                "INSERT INTO extraction_cursors (tenant, session, upto) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                (tenant, cursor_key(str(user), session), upto),
            )


async def m016_utf8_user_names(conn: PgConnection) -> None:
    # SQLite's m016: users named in UTF-8 in the header but stored as its latin-1 reading get the name meant.
    await _utf8_names(conn, "user")


MIGRATIONS: list[tuple[str, Callable[[PgConnection], Awaitable[None]]]] = [
    ("001_sessions", m001_sessions),
    ("002_fragments", m002_fragments),
    ("003_items", m003_items),
    ("004_traces", m004_traces),
    ("005_transfer_progress", m005_transfer_progress),
    ("006_item_expiry", m006_item_expiry),
    ("007_extraction_claims", m007_extraction_claims),
    ("008_item_history", item_history),
    ("009_usage_and_listings", m009_usage_and_listings),
    ("010_hashed_generation_keys", m010_hashed_generation_keys),
    ("011_response_sessions", m011_response_sessions),
    ("012_no_hnsw_on_fragments", m012_no_hnsw_on_fragments),
    ("013_item_schema", m013_item_schema),
    ("014_utf8_session_names", m014_utf8_session_names),
    ("015_forgotten_turns", m015_forgotten_turns),
    ("016_utf8_user_names", m016_utf8_user_names),
    ("017_fragment_sightings", m017_fragment_sightings),
    ("018_cursors_by_user", m018_cursors_by_user),
]

async def migrate(conn: PgConnection, dim: int | None) -> list[str]:
    """Apply pending migrations and fit the vector columns to ``dim``; returns the names applied.

    ``dim`` None leaves the vector columns as they are.

    ``conn`` is in autocommit: the advisory lock is the session's, and each
    migration is its own transaction, recorded in ``_migrations`` with it.
    """
    await conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
    try:
        await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied DOUBLE PRECISION NOT NULL)"
        )
        cur = await conn.execute("SELECT name FROM _migrations")
        done = {row[0] for row in await cur.fetchall()}
        applied = []
        for name, fn in MIGRATIONS:
            if name in done:
                continue
            async with conn.transaction():
                await fn(conn)
                await conn.execute(
                    "INSERT INTO _migrations (name, applied) VALUES (%s, %s)", (name, time.time())
                )
            applied.append(name)
        if dim is not None:
            async with conn.transaction():
                await pg_vectors.fit_vectors(conn, dim)
        return applied
    finally:
        await conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))


async def _script(conn: PgConnection, sql: str) -> None:
    for statement in sql.split(";"):
        if statement.strip():
            await conn.execute(statement)
