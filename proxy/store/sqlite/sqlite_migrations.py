"""Named schema migrations, applied in order, each once (recorded in ``_migrations``).

Append new migrations at the end; never edit one that has shipped.
tests/test_migrations.py applies all of them to a blank database.

Every row carries ``tenant``: isolation is enforced by every query filtering
on it, and vectors (sqlite_vectors.py) are partitioned by ``scope`` (tenant + user), so one
user's search never scans another's vectors; each partition grows by chunks of
``VECTOR_CHUNK`` vectors, so a new user costs kilobytes.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable

from ..legacy_schema import LegacySchema, legacy_schema
from ..records import cursor_key
from ..session_names import meant, names, rename, tables
from .sqlite_database import Connection
from .sqlite_edits import ITEM_TRIGGERS
from .sqlite_vectors import m007_small_vector_chunks


def m001_sessions(conn: Connection) -> None:
    _script(conn,
        """
        CREATE TABLE summaries (
            id TEXT PRIMARY KEY,
            tenant TEXT NOT NULL,
            user TEXT NOT NULL,
            session TEXT NOT NULL,
            level INTEGER NOT NULL,
            text TEXT NOT NULL,
            tokens INTEGER NOT NULL,
            start INTEGER NOT NULL,
            end INTEGER NOT NULL,
            created REAL NOT NULL
        );
        CREATE INDEX summaries_session ON summaries (tenant, session);
        CREATE INDEX summaries_user ON summaries (tenant, user);
        -- A compressed prefix: the conversation messages [0, upto) whose chain hash is
        -- chain_hash are represented by the summaries in summary_ids (JSON list, oldest first).
        CREATE TABLE prefixes (
            tenant TEXT NOT NULL,
            session TEXT NOT NULL,
            user TEXT NOT NULL,
            chain_hash TEXT NOT NULL,
            upto INTEGER NOT NULL,
            summary_ids TEXT NOT NULL,
            created REAL NOT NULL,
            PRIMARY KEY (tenant, session, chain_hash)
        );
        CREATE INDEX prefixes_user ON prefixes (tenant, user);
        -- Leases that hold across worker processes (compression of one session).
        CREATE TABLE locks (
            name TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            expires REAL NOT NULL
        );
        """
    )


def m002_fragments(conn: Connection) -> None:
    _script(conn,
        """
        CREATE TABLE fragments (
            id INTEGER PRIMARY KEY,
            tenant TEXT NOT NULL,
            user TEXT NOT NULL,
            session TEXT NOT NULL,
            hash TEXT NOT NULL,
            role TEXT NOT NULL,
            text TEXT NOT NULL,
            terms TEXT NOT NULL,
            position INTEGER NOT NULL,
            tokens INTEGER NOT NULL,
            created REAL NOT NULL,
            status TEXT NOT NULL DEFAULT 'active',
            UNIQUE (tenant, user, hash)
        );
        CREATE INDEX fragments_scope ON fragments (tenant, user, id);
        CREATE INDEX fragments_session ON fragments (tenant, session, position);
        """
    )


def m003_items(conn: Connection) -> None:
    _script(conn,
        """
        CREATE TABLE items (
            id INTEGER PRIMARY KEY,
            tenant TEXT NOT NULL,
            user TEXT NOT NULL,
            session TEXT,
            type TEXT NOT NULL,
            key TEXT NOT NULL,
            content TEXT NOT NULL,
            terms TEXT NOT NULL,
            importance REAL NOT NULL,
            confidence REAL NOT NULL,
            source TEXT NOT NULL,
            expires_at TEXT,
            status TEXT NOT NULL DEFAULT 'active',
            superseded_by INTEGER,
            turns TEXT NOT NULL DEFAULT '[]',
            fragment_hashes TEXT NOT NULL DEFAULT '[]',
            seen_count INTEGER NOT NULL DEFAULT 1,
            access_count INTEGER NOT NULL DEFAULT 0,
            last_access REAL,
            created REAL NOT NULL,
            updated REAL NOT NULL
        );
        CREATE INDEX items_scope ON items (tenant, user, status);
        CREATE INDEX items_key ON items (tenant, user, key);
        -- Per-session extraction cursor: how many conversation messages were already mined.
        CREATE TABLE extraction_cursors (
            tenant TEXT NOT NULL,
            session TEXT NOT NULL,
            upto INTEGER NOT NULL,
            PRIMARY KEY (tenant, session)
        );
        """
    )


def m004_traces(conn: Connection) -> None:
    _script(conn,
        """
        CREATE TABLE traces (
            id TEXT PRIMARY KEY,
            tenant TEXT NOT NULL,
            user TEXT NOT NULL,
            session TEXT NOT NULL,
            created REAL NOT NULL,
            data TEXT NOT NULL
        );
        CREATE INDEX traces_user ON traces (tenant, user);
        CREATE INDEX traces_created ON traces (created);
        -- Bumped when a scope loses or hides fragments (forget, supersede), so in-memory indexes reload.
        CREATE TABLE scope_generations (
            scope TEXT PRIMARY KEY,
            generation INTEGER NOT NULL
        );
        """
    )


def m005_item_expiry(conn: Connection) -> None:
    # ``expires`` (epoch seconds) is ``expires_at`` as the database can compare it, so expiry
    # cleanup is one statement. A bare date means "through that day" (UTC), a naive time is
    # UTC, and text SQLite cannot read stays NULL: junk never deletes a memory.
    _script(conn,
        """
        ALTER TABLE items ADD COLUMN expires REAL;
        UPDATE items SET expires = (julianday(trim(expires_at)) - 2440587.5) * 86400.0
            + CASE WHEN length(trim(expires_at)) = 10 THEN 86400.0 ELSE 0.0 END
            WHERE expires_at IS NOT NULL;
        CREATE INDEX items_expires ON items (expires) WHERE expires IS NOT NULL
        """
    )


def m006_extraction_claims(conn: Connection) -> None:
    # A claim on a session's next turns: who extracts them, and until when (store/extraction_cursors.py).
    _script(conn,
        """
        ALTER TABLE extraction_cursors ADD COLUMN owner TEXT;
        ALTER TABLE extraction_cursors ADD COLUMN lease_expires REAL
        """
    )


def m008_hashed_generation_keys(conn: Connection) -> None:
    """Key ``scope_generations`` by a digest of the scope, not the plain (tenant, user)."""
    rows = conn.execute("SELECT scope, generation FROM scope_generations").fetchall()
    conn.execute("DELETE FROM scope_generations")
    for scope, generation in rows:
        conn.execute(
            "INSERT INTO scope_generations (scope, generation) VALUES (?, ?)",
            (hashlib.sha256(str(scope).encode()).hexdigest(), generation),
        )


def m009_item_history(conn: Connection) -> None:
    _script(conn,
        """
        CREATE TABLE item_events (
            id INTEGER PRIMARY KEY,
            item INTEGER NOT NULL,
            tenant TEXT NOT NULL,
            user TEXT NOT NULL,
            event TEXT NOT NULL,
            at REAL NOT NULL,
            by TEXT,
            detail TEXT NOT NULL DEFAULT '{}'
        );
        CREATE INDEX item_events_item ON item_events (item, id)
        """
    )
    for trigger in ITEM_TRIGGERS:  # sqlite_edits.py: why triggers, and what each records
        conn.execute(trigger)


def m010_usage_and_listings(conn: Connection) -> None:
    _script(conn,
        """
        -- Per tenant, model and UTC day: what clients sent, what was forwarded, what the upstream billed.
        CREATE TABLE usage (
            tenant TEXT NOT NULL,
            model TEXT NOT NULL,
            day TEXT NOT NULL,
            requests INTEGER NOT NULL DEFAULT 0,
            tokens_client INTEGER NOT NULL DEFAULT 0,
            tokens_forwarded INTEGER NOT NULL DEFAULT 0,
            billed_requests INTEGER NOT NULL DEFAULT 0,
            prompt_tokens INTEGER NOT NULL DEFAULT 0,
            completion_tokens INTEGER NOT NULL DEFAULT 0,
            cached_tokens INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (tenant, day, model)
        );
        CREATE INDEX traces_recent ON traces (tenant, created, id);
        CREATE INDEX fragments_user_session ON fragments (tenant, user, session)
        """
    )


def m011_response_sessions(conn: Connection) -> None:
    # A Responses API response id → the session that produced it (store/response_sessions.py).
    _script(conn,
        """
        CREATE TABLE response_sessions (
            tenant TEXT NOT NULL,
            response_id TEXT NOT NULL,
            user TEXT NOT NULL,
            session TEXT NOT NULL,
            upto INTEGER NOT NULL,
            created REAL NOT NULL,
            PRIMARY KEY (tenant, response_id)
        );
        CREATE INDEX response_sessions_user ON response_sessions (tenant, user)
        """
    )


def m012_item_schema(conn: Connection) -> None:
    """Every item's ``category``, ``standing`` and ``about`` (SPEC §5), read for old rows from key and type."""
    _script(conn,
        """
        ALTER TABLE items ADD COLUMN category TEXT NOT NULL DEFAULT 'other';
        ALTER TABLE items ADD COLUMN standing INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE items ADD COLUMN about TEXT NOT NULL DEFAULT 'user'
        """
    )
    rows = conn.execute("SELECT id, key, type, source, importance FROM items").fetchall()
    conn.executemany(
        "UPDATE items SET category = ?, standing = ?, about = ? WHERE id = ?",
        [(*_filled(legacy_schema(r[1], r[2], r[3], float(r[4]))), r[0]) for r in rows],
    )


def _filled(schema: LegacySchema) -> tuple[str, int, str]:
    return schema.category, int(schema.standing), schema.about


def m013_utf8_session_names(conn: Connection) -> None:
    """Sessions named in UTF-8 but stored as its latin-1 reading get the name the client meant."""
    _utf8_names(conn, "session")


def _utf8_names(conn: Connection, column: str) -> None:
    """Names in ``column`` stored as the latin-1 reading of UTF-8 bytes get the name meant (``session_names``)."""
    for table in tables(column):
        for (old,) in conn.execute(names(table, column)).fetchall():
            new = meant(old)
            if new is not None:
                conn.execute(*rename(table, old, new, "?", column))


def m014_forgotten_turns(conn: Connection) -> None:
    # The digests of purged turns, by session: a conversation resent after a purge is not
    # stored again (store/forgetting.py). No text: a digest only matches the same words.
    _script(conn,
        """
        CREATE TABLE forgotten_turns (
            tenant TEXT NOT NULL,
            user TEXT NOT NULL,
            session TEXT NOT NULL,
            hash TEXT NOT NULL,
            PRIMARY KEY (tenant, user, session, hash)
        )
        """
    )


def m015_ids_never_reused(conn: Connection) -> None:
    """A memory's or a turn's id is never given to another (``AUTOINCREMENT``).

    An ``INTEGER PRIMARY KEY`` takes the largest id plus one, so the newest
    memory deleted gave its id to the next one: a client retrying its
    ``DELETE .../memories/{id}`` deleted an unrelated memory, a superseded
    item pointed at it, a page cursor skipped it. SQLite cannot add
    ``AUTOINCREMENT`` to a table, so each is rebuilt with the same columns,
    rows, ids, indexes and triggers; the counter starts past every id still
    named (``superseded_by`` may name a deleted one). PostgreSQL's ids come
    from sequences, which never go back.
    """
    for table, named in (("items", ("id", "superseded_by")), ("fragments", ("id",))):
        _rebuilt_with_autoincrement(conn, table, named)


def _rebuilt_with_autoincrement(conn: Connection, table: str, named: tuple[str, ...]) -> None:
    (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()
    create = re.sub(r"\bid INTEGER PRIMARY KEY\b", "id INTEGER PRIMARY KEY AUTOINCREMENT", sql, count=1)
    if create == sql:
        raise RuntimeError(f"{table}: its id column is not the INTEGER PRIMARY KEY this migration rebuilds")
    extras = [row[0] for row in conn.execute(
        "SELECT sql FROM sqlite_master WHERE tbl_name = ? AND type IN ('index', 'trigger') AND sql IS NOT NULL",
        (table,))]
    conn.execute(create.replace(f"CREATE TABLE {table}", f"CREATE TABLE {table}_rebuilt", 1))
    conn.execute(f"INSERT INTO {table}_rebuilt SELECT * FROM {table}")
    conn.execute(f"DROP TABLE {table}")
    conn.execute(f"ALTER TABLE {table}_rebuilt RENAME TO {table}")
    for statement in extras:
        conn.execute(statement)
    high = max(conn.execute(f"SELECT coalesce(max({c}), 0) FROM {table}").fetchone()[0] for c in named)
    conn.execute("DELETE FROM sqlite_sequence WHERE name = ?", (table,))
    conn.execute("INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)", (table, high))


def _script(conn: Connection, sql: str) -> None:
    # Not executescript(): it would COMMIT the surrounding transaction first.
    for statement in sql.split(";"):
        if statement.strip():
            conn.execute(statement)


def m016_utf8_user_names(conn: Connection) -> None:
    """Users named in UTF-8 in ``X-Paperclip-User`` but stored as its latin-1 reading get the name the
    client meant (``session_names``), the one the body's ``user`` gives."""
    _utf8_names(conn, "user")


def m017_fragment_sightings(conn: Connection) -> None:
    # A text is stored once per user (by its hash), in the session that said it first; the other sessions
    # that said it, and where, are noted here, so forgetting the first moves the turn to one of them
    # (store/forgetting.py). No text: a digest and a place.
    _script(conn,
        """
        CREATE TABLE fragment_sightings (
            tenant TEXT NOT NULL,
            user TEXT NOT NULL,
            hash TEXT NOT NULL,
            session TEXT NOT NULL,
            position INTEGER NOT NULL,
            PRIMARY KEY (tenant, user, hash, session)
        )
        """
    )


def m018_cursors_by_user(conn: Connection) -> None:
    """A session's extraction cursor becomes each of its users' (``records.cursor_key``): a session's name is
    any string a client sends, and two users who sent one shared one cursor, so the second was never mined.
    A cursor of a session nothing is stored of any more names no user, and goes."""
    for tenant, session, upto in conn.execute("SELECT tenant, session, upto FROM extraction_cursors").fetchall():
        owners = conn.execute(
            "SELECT user FROM fragments WHERE tenant = ? AND session = ?"
            " UNION SELECT user FROM items WHERE tenant = ? AND session = ?", (tenant, session, tenant, session),
        ).fetchall()
        conn.execute("DELETE FROM extraction_cursors WHERE tenant = ? AND session = ?", (tenant, session))
        conn.executemany(
            "INSERT OR IGNORE INTO extraction_cursors (tenant, session, upto) VALUES (?, ?, ?)",
            [(tenant, cursor_key(str(user), session), upto) for (user,) in owners],
        )


MIGRATIONS: list[tuple[str, Callable[[Connection], None]]] = [
    ("001_sessions", m001_sessions),
    ("002_fragments", m002_fragments),
    ("003_items", m003_items),
    ("004_traces", m004_traces),
    ("005_item_expiry", m005_item_expiry),
    ("006_extraction_claims", m006_extraction_claims),
    ("007_small_vector_chunks", m007_small_vector_chunks),
    ("008_hashed_generation_keys", m008_hashed_generation_keys),
    ("009_item_history", m009_item_history),
    ("010_usage_and_listings", m010_usage_and_listings),
    ("011_response_sessions", m011_response_sessions),
    ("012_item_schema", m012_item_schema),
    ("013_utf8_session_names", m013_utf8_session_names),
    ("014_forgotten_turns", m014_forgotten_turns),
    ("015_ids_never_reused", m015_ids_never_reused),
    ("016_utf8_user_names", m016_utf8_user_names),
    ("017_fragment_sightings", m017_fragment_sightings),
    ("018_cursors_by_user", m018_cursors_by_user),
]


def apply(conn: Connection) -> list[str]:
    """Apply pending migrations (call inside a write transaction); returns the names applied."""
    conn.execute("CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied REAL NOT NULL)")
    done = {row[0] for row in conn.execute("SELECT name FROM _migrations")}
    applied = []
    for name, fn in MIGRATIONS:
        if name in done:
            continue
        fn(conn)
        conn.execute("INSERT INTO _migrations (name, applied) VALUES (?, ?)", (name, time.time()))
        applied.append(name)
    return applied
