"""The ``stores`` fixture: the per-concept stores on SQLite, then on PostgreSQL (a test runs on both)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from proxy.store import open_store
from proxy.store.pg_fragments import PgFragmentStore
from proxy.store.pg_items import PgItemStore
from proxy.store.pg_sessions import PgSessionStore
from proxy.store.pg_traces import PgTraceStore
from proxy.store.pg_users import PgUserStore
from proxy.store.postgres import PgDatabase

DIM = 8


@dataclass
class Stores:
    sessions: Any
    fragments: Any
    items: Any
    traces: Any
    users: Any


@pytest.fixture(params=["sqlite", "postgres"])
async def stores(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Stores]:
    if request.param == "sqlite":
        store = await asyncio.to_thread(open_store, str(tmp_path / "p.db"), DIM)
        yield Stores(store.sessions, store.fragments, store.items, store.traces, store.users)
        store.close()
    else:
        db = await PgDatabase.open(request.getfixturevalue("pg_url"), DIM)
        yield Stores(PgSessionStore(db), PgFragmentStore(db), PgItemStore(db), PgTraceStore(db),
                     PgUserStore(db))
        await db.close()
