"""Migrations on a blank database, and the expiry column back-filled from rows written before it."""

from __future__ import annotations

import datetime as dt
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from proxy.memory.lifecycle import expiry_epoch
from proxy.store import open_store
from proxy.store.records import ItemWrite, NewItem
from proxy.store.sqlite import sqlite_migrations as migrations
from proxy.store.sqlite.sqlite_database import Database

BEFORE_EXPIRY = [name for name, _ in migrations.MIGRATIONS].index("005_item_expiry")


def test_every_migration_applies_once_to_a_blank_database(tmp_path: Path) -> None:
    db = Database(str(tmp_path / "blank.db"))
    try:
        assert db.run_sync(migrations.apply) == [name for name, _ in migrations.MIGRATIONS]
        assert db.run_sync(migrations.apply) == []
    finally:
        db.close()


@pytest.mark.parametrize(
    "expires_at",
    ["2031-05-03", "2031-05-03T10:20:30", "2031-05-03T10:20:30+02:00", "2031-05-03T10:20:30.5Z", None, "soon"],
)
def test_expiry_backfill_reads_expires_at_as_the_memory_layer_does(tmp_path: Path, expires_at: str | None) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied REAL NOT NULL)")
    for name, fn in migrations.MIGRATIONS[:BEFORE_EXPIRY]:
        fn(conn)
        conn.execute("INSERT INTO _migrations VALUES (?, 0)", (name,))
    conn.execute(
        "INSERT INTO items (tenant, user, type, key, content, terms, importance, confidence, source,"
        " expires_at, created, updated) VALUES ('t', 'u', 'event', 'k', 'c', 'c', 0.5, 1, 'user-stated', ?, 0, 0)",
        (expires_at,),
    )
    assert migrations.apply(conn)[0] == "005_item_expiry"
    (stored,) = conn.execute("SELECT expires FROM items").fetchone()
    conn.close()
    expected = expiry_epoch(expires_at)  # None for no expiry and for junk alike
    assert stored == (None if expected is None else pytest.approx(expected))


async def test_expire_deletes_exactly_the_items_past_their_expiry(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "s.db"), dim=4)
    now = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
    try:
        for key, expires_at in [("gone", "2029-12-31"), ("today", "2030-01-01"), ("never", None)]:
            item = NewItem("event", key, key, key, 0.5, 1.0, "user-stated", expires_at, expiry_epoch(expires_at), [], [])
            await store.items.remember("t", "u", None, item, np.array([1.0, 0.0, 0.0, 0.0]), lambda _: ItemWrite())
        assert await store.items.expire(now) == 1
        assert sorted(r.key for r in await store.items.all("t", "u")) == ["never", "today"]
        vectors = await store.db.read(lambda c: c.execute("SELECT count(*) FROM vec_items").fetchone()[0])
        assert vectors == 2
    finally:
        store.close()


def test_ids_never_reused_keeps_every_row_index_and_trigger_and_counts_past_every_id_named(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied REAL NOT NULL)")
    before = [name for name, _ in migrations.MIGRATIONS].index("015_ids_never_reused")
    for name, fn in migrations.MIGRATIONS[:before]:
        fn(conn)
        conn.execute("INSERT INTO _migrations VALUES (?, 0)", (name,))
    columns = "tenant, user, type, key, content, terms, importance, confidence, source, created, updated"
    for content in ("tea", "jazz", "cats"):
        conn.execute(f"INSERT INTO items ({columns}) VALUES ('t', 'u', 'fact', 'k', ?, ?, 0.5, 1, 'user', 0, 0)",
                     (content, content))
    conn.execute("UPDATE items SET superseded_by = 7, status = 'superseded' WHERE content = 'tea'")
    conn.execute("DELETE FROM items WHERE content = 'cats'")
    conn.execute("INSERT INTO fragments (tenant, user, session, hash, role, text, terms, position, tokens, created)"
                 " VALUES ('t', 'u', 's', 'h1', 'user', 'hi', 'hi', 0, 1, 0)")
    shape = {t: conn.execute(f"PRAGMA table_info({t})").fetchall() for t in ("items", "fragments")}
    kept = conn.execute("SELECT * FROM items ORDER BY id").fetchall()
    named = sorted(r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE tbl_name IN ('items', 'fragments') AND sql IS NOT NULL"))

    assert migrations.apply(conn) == [name for name, _ in migrations.MIGRATIONS[before:]]  # this one and any later
    assert {t: conn.execute(f"PRAGMA table_info({t})").fetchall() for t in ("items", "fragments")} == shape
    assert conn.execute("SELECT * FROM items ORDER BY id").fetchall() == kept
    assert sorted(r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE tbl_name IN ('items', 'fragments') AND sql IS NOT NULL")) == named
    conn.execute(f"INSERT INTO items ({columns}) VALUES ('t', 'u', 'fact', 'k', 'new', 'new', 0.5, 1, 'user', 0, 0)")
    (new,) = conn.execute("SELECT id FROM items WHERE content = 'new'").fetchone()
    assert new == 8  # past 7, the id a superseded item still names
    assert conn.execute("SELECT event FROM item_events WHERE item = ?", (new,)).fetchall() == [("created",)]
    conn.execute("DELETE FROM fragments")
    conn.execute("INSERT INTO fragments (tenant, user, session, hash, role, text, terms, position, tokens, created)"
                 " VALUES ('t', 'u', 's', 'h2', 'user', 'hi', 'hi', 0, 1, 0)")
    assert conn.execute("SELECT id FROM fragments").fetchone() == (2,)
    conn.close()
