"""The ``stores`` fixture: the per-concept stores on SQLite, then on PostgreSQL (a test runs on both)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from proxy.store import open_store
from proxy.store.postgres.pg_cursors import PgExtractionCursorStore
from proxy.store.postgres.pg_database import PgDatabase
from proxy.store.postgres.pg_edits import PgItemEdits
from proxy.store.postgres.pg_forgetting import PgForgetStore
from proxy.store.postgres.pg_fragments import PgFragmentStore
from proxy.store.postgres.pg_items import PgItemStore
from proxy.store.postgres.pg_listings import PgListingStore
from proxy.store.postgres.pg_response_sessions import PgResponseSessionStore
from proxy.store.postgres.pg_sessions import PgSessionStore
from proxy.store.postgres.pg_traces import PgTraceStore
from proxy.store.postgres.pg_usage import PgUsageStore
from proxy.store.postgres.pg_users import PgUserStore
from proxy.store.records import ItemWrite, NewItem

DIM = 8


@dataclass
class Stores:
    sessions: Any
    fragments: Any
    items: Any
    traces: Any
    users: Any
    cursors: Any
    edits: Any
    listings: Any
    usage: Any
    responses: Any
    forgetting: Any


@pytest.fixture(params=["sqlite", "postgres"])
async def stores(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Stores]:
    if request.param == "sqlite":
        store = await asyncio.to_thread(open_store, str(tmp_path / "p.db"), DIM)
        yield Stores(store.sessions, store.fragments, store.items, store.traces, store.users, store.cursors,
                     store.edits, store.listings, store.usage, store.responses, store.forgetting)
        store.close()
    else:
        db = await PgDatabase.open(request.getfixturevalue("pg_url"), DIM)
        yield Stores(PgSessionStore(db), PgFragmentStore(db), PgItemStore(db), PgTraceStore(db),
                     PgUserStore(db), PgExtractionCursorStore(db), PgItemEdits(db), PgListingStore(db),
                     PgUsageStore(db), PgResponseSessionStore(db), PgForgetStore(db))
        await db.close()


async def add_item(items: Any, tenant: str, user: str, session: str | None, item: NewItem, vector: Any,
                   supersedes: Sequence[int] = ()) -> int:
    """Store ``item`` superseding ``supersedes`` (the choice ``remember`` would have made)."""
    _, new_id = await items.remember(tenant, user, session, item, vector,
                                     lambda active: ItemWrite(supersedes=tuple(supersedes)))
    return int(new_id)
