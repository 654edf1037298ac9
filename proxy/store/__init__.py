"""Storage behind one interface: ``Store`` groups the per-concept stores over one database.

SQLite (``open_store``: one file, one process) and PostgreSQL
(``open_postgres``: replicas on one database) provide the same per-concept
stores (``interface.py``); nothing outside ``proxy/store`` issues SQL.
``connect`` opens whichever ``storage.url`` names.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from . import urls
from .interface import (
    Edits,
    ExtractionCursors,
    Forgetting,
    Fragments,
    Items,
    Listings,
    ResponseSessions,
    Sessions,
    Traces,
    Usage,
    Users,
)
from .postgres.pg_database import PgDatabase
from .sqlite import sqlite_migrations as migrations
from .sqlite import sqlite_vectors as vector_tables
from .sqlite.sqlite_cursors import ExtractionCursorStore
from .sqlite.sqlite_database import Connection, Database
from .sqlite.sqlite_edits import ItemEdits
from .sqlite.sqlite_forgetting import ForgetStore
from .sqlite.sqlite_fragments import FragmentStore
from .sqlite.sqlite_items import ItemStore
from .sqlite.sqlite_listings import ListingStore
from .sqlite.sqlite_response_sessions import ResponseSessionStore
from .sqlite.sqlite_sessions import SessionStore
from .sqlite.sqlite_traces import TraceStore
from .sqlite.sqlite_usage import UsageStore
from .sqlite.sqlite_users import UserStore


@dataclass
class Store:
    db: Database | PgDatabase
    sessions: Sessions
    fragments: Fragments
    items: Items
    traces: Traces
    users: Users
    cursors: ExtractionCursors
    edits: Edits
    listings: Listings
    usage: Usage
    responses: ResponseSessions
    forgetting: Forgetting

    def bounded(self, timeout_s: float) -> Store:
        """The same database, each call giving up after ``timeout_s`` (``DatabaseUnavailable``): for the
        request path, which must degrade rather than wait (the admin API and maintenance wait)."""
        db = self.db.bounded(timeout_s)
        return _sqlite_stores(db) if isinstance(db, Database) else _pg_stores(db)

    async def ping(self) -> None:
        """``DatabaseUnavailable`` unless the database answers now (``/readyz``)."""
        await self.db.ping()

    def close(self) -> None:
        """Close a SQLite store from synchronous code; ``aclose`` closes either kind."""
        if not isinstance(self.db, Database):
            raise TypeError("a PostgreSQL store closes its pool on the event loop: await aclose()")
        self.db.close()

    async def aclose(self) -> None:
        if isinstance(self.db, Database):
            await asyncio.to_thread(self.db.close)
        else:
            await self.db.close()


def open_store(path: str, dim: int | None) -> Store:
    """Open (creating if needed) the SQLite database, apply migrations, make the vector tables.

    ``dim`` None leaves the vector tables as they are: for a reader that embeds
    nothing and so does not know the model's dimension.
    """
    db = Database(path)

    def setup(conn: Connection) -> None:
        migrations.apply(conn)
        if dim is not None:
            vector_tables.ensure_vectors(conn, dim)

    db.run_sync(setup)
    return _sqlite_stores(db)


def _sqlite_stores(db: Database) -> Store:
    return Store(
        db, SessionStore(db), FragmentStore(db), ItemStore(db), TraceStore(db), UserStore(db),
        ExtractionCursorStore(db), ItemEdits(db), ListingStore(db), UsageStore(db), ResponseSessionStore(db),
        ForgetStore(db),
    )


async def open_postgres(url: str, dim: int | None) -> Store:
    """Connect a pool to PostgreSQL, migrating first (once across replicas starting together)."""
    return _pg_stores(await PgDatabase.open(url, dim))


def _pg_stores(db: PgDatabase) -> Store:
    from .postgres.pg_cursors import PgExtractionCursorStore
    from .postgres.pg_edits import PgItemEdits
    from .postgres.pg_forgetting import PgForgetStore
    from .postgres.pg_fragments import PgFragmentStore
    from .postgres.pg_items import PgItemStore
    from .postgres.pg_listings import PgListingStore
    from .postgres.pg_response_sessions import PgResponseSessionStore
    from .postgres.pg_sessions import PgSessionStore
    from .postgres.pg_traces import PgTraceStore
    from .postgres.pg_usage import PgUsageStore
    from .postgres.pg_users import PgUserStore

    return Store(
        db, PgSessionStore(db), PgFragmentStore(db), PgItemStore(db), PgTraceStore(db), PgUserStore(db),
        PgExtractionCursorStore(db), PgItemEdits(db), PgListingStore(db), PgUsageStore(db),
        PgResponseSessionStore(db), PgForgetStore(db),
    )


async def connect(url: str, dim: int | None) -> Store:
    """The store ``storage.url`` names (already validated by config); ``dim`` as for ``open_store``."""
    if urls.is_postgres(url):
        return await open_postgres(url, dim)
    return await asyncio.to_thread(open_store, urls.sqlite_path(url), dim)
