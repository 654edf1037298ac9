"""Storage behind one interface: ``Store`` groups the per-concept stores over one database.

A server database can replace SQLite by providing the same per-concept
stores (sessions, fragments, items, traces, users, extraction cursors,
response sessions); nothing outside
``proxy/store`` issues SQL.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import migrations, vector_tables
from .db import Connection, Database
from .edits import ItemEdits
from .extraction_cursors import ExtractionCursorStore
from .fragments import FragmentStore
from .item_rows import ItemStore
from .listings import ListingStore
from .response_sessions import ResponseSessionStore
from .sessions import SessionStore
from .traces import TraceStore
from .usage import UsageStore
from .users import UserStore


@dataclass
class Store:
    db: Database
    sessions: SessionStore
    fragments: FragmentStore
    items: ItemStore
    traces: TraceStore
    users: UserStore
    cursors: ExtractionCursorStore
    edits: ItemEdits
    listings: ListingStore
    usage: UsageStore
    responses: ResponseSessionStore

    def close(self) -> None:
        self.db.close()


def open_store(path: str, dim: int | None) -> Store:
    """Open (creating if needed) the database, apply migrations, make the vector tables.

    ``dim`` None leaves the vector tables as they are: for a reader that embeds
    nothing and so does not know the model's dimension.
    """
    db = Database(path)

    def setup(conn: Connection) -> None:
        migrations.apply(conn)
        if dim is not None:
            vector_tables.ensure_vectors(conn, dim)

    db.run_sync(setup)
    return Store(
        db, SessionStore(db), FragmentStore(db), ItemStore(db), TraceStore(db), UserStore(db),
        ExtractionCursorStore(db), ItemEdits(db), ListingStore(db), UsageStore(db), ResponseSessionStore(db),
    )
