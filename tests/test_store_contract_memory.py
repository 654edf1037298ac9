"""Items and users keep one contract on SQLite and on PostgreSQL: every test runs on both."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from typing import Any

import numpy as np

from proxy.store.records import Forgot, ItemWrite, NewFragment, NewItem, SummaryRow, cursor_key
from tests.store_backends import DIM, Stores, add_item


def _item(key: str, content: str, expires_at: str | None = None, importance: float = 0.8) -> NewItem:
    expires = None if expires_at is None else dt.datetime.fromisoformat(expires_at).timestamp()
    return NewItem("preference", key, content, content.lower(), importance, 0.9, "user", expires_at,
                   expires, (1, 2), ("h1",))


def _vec(seed: int) -> Any:
    v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


async def test_items_are_added_superseded_merged_touched_and_deleted(stores: Stores) -> None:
    items = stores.items
    old = await add_item(items, "acme", "u1", "s1", _item("user.diet", "Vegetarian"), _vec(1))
    version = await items.version("acme", "u1")
    new = await add_item(items, "acme", "u1", "s1", _item("user.diet", "Vegan"), _vec(2), supersedes=[old])
    assert await items.version("acme", "u1") != version
    active = await items.active_with_vectors("acme", "u1")
    assert [(row.id, row.content) for row, _ in active] == [(new, "Vegan")]
    assert np.allclose(active[0][1], _vec(2))
    everything = await items.all("acme", "u1", include_inactive=True)
    assert [(r.id, r.status, r.superseded_by) for r in everything] == [
        (old, "superseded", new), (new, "active", None)]
    assert [r.id for r in await items.all("acme", "u1")] == [new]
    merged = await items.remember("acme", "u1", "s1", _item("user.diet", "Vegan"), _vec(2),
                                  lambda active: ItemWrite(merge_into=new))
    assert merged == (ItemWrite(merge_into=new), new)
    await items.touch("acme", "u1", [new])
    row = (await items.get("acme", "u1", [new, old, 999]))[new]
    assert (row.seen_count, row.access_count, row.turns, row.fragment_hashes) == (2, 1, [1, 2], ["h1"])
    assert row.last_access is not None and set(await items.get("acme", "u1", [old, new])) == {old, new}
    assert await items.get("beta", "u1", [new]) == {}
    assert await items.terms("acme", "u1") == [(new, "vegan")]
    assert [i for i, _ in await items.knn("acme", "u1", _vec(2), 5)] == [new, old]
    assert await stores.forgetting.memory("beta", "u1", new) is None
    assert await stores.forgetting.memory("acme", "u1", new) == Forgot((new,), 0, False, 0)
    assert await items.all("acme", "u1") == []
    assert [i for i, _ in await items.knn("acme", "u1", _vec(2), 5)] == [old]  # superseded history stays


async def test_a_write_may_store_the_item_standing(stores: Stores) -> None:
    """The value that replaces a standing fact is stored standing when the write says so."""
    items = stores.items
    old = await add_item(items, "acme", "u1", "s1", _item("user.job", "Designer at Google"), _vec(1))
    _, new = await items.remember("acme", "u1", "s1", _item("user.job.next", "Starts at Spotify"), _vec(2),
                                  lambda active: ItemWrite(supersedes=(old,), standing=True))
    plain = await add_item(items, "acme", "u1", "s1", _item("user.plan", "A trip in May"), _vec(3))
    rows = {r.id: r for r in await items.all("acme", "u1")}
    assert set(rows) == {new, plain} and rows[new].standing and not rows[plain].standing


async def test_a_cursor_moves_by_claims_one_claimant_at_a_time(stores: Stores) -> None:
    cursors = stores.cursors
    assert await cursors.cursor("acme", "s1") == 0
    assert await cursors.claim("acme", "s1", 0, "a", 30)
    assert not await cursors.claim("acme", "s1", 0, "b", 30)  # a holds the turns
    await cursors.finish("acme", "s1", "a", 6)
    assert not await cursors.claim("acme", "s1", 0, "b", 30)  # the cursor moved: 0 is stale
    assert await cursors.claim("acme", "s1", 6, "b", 30)
    await cursors.release("acme", "s1", "b")
    assert await cursors.claim("acme", "s1", 6, "c", 0.01)
    await asyncio.sleep(0.05)
    assert await cursors.claim("acme", "s1", 6, "d", 30)  # c's lease ran out
    await cursors.finish("acme", "s1", "c", 9)  # c lost its claim: nothing moves
    assert (await cursors.cursor("acme", "s1"), await cursors.cursor("beta", "s1")) == (6, 0)


async def test_expired_items_are_deleted_and_stale_ones_archived(stores: Stores) -> None:
    items = stores.items
    await add_item(items, "acme", "u1", None, _item("task.a", "Due yesterday", "2026-01-01T00:00:00+00:00"), _vec(1))
    keep = await add_item(items, "acme", "u1", None, _item("task.b", "Due later", "2099-01-01T00:00:00+00:00"), _vec(2))
    low = await add_item(items, "acme", "u1", None, _item("p.c", "Minor", importance=0.1), _vec(3))
    assert await items.expire(dt.datetime(2026, 6, 1, tzinfo=dt.UTC)) == 1
    beta = await add_item(items, "beta", "u1", None, _item("p.c", "Minor", importance=0.1), _vec(3))
    gamma = await add_item(items, "gamma", "u1", None, _item("p.c", "Minor", importance=0.1), _vec(3))
    later = time.time() + 1
    assert await items.archive_stale(later, 0.3, only=()) == 0  # no tenant named: none
    assert await items.archive_stale(later, 0.3, only=("acme", "gamma"), skip=("gamma",)) == 1
    assert {r.id: r.status for r in await items.all("acme", "u1", include_inactive=True)} == {
        keep: "active", low: "archived"}
    assert await items.archive_stale(later, 0.3, skip=("acme",)) == 2  # every other tenant
    assert [r.status for t, i in (("beta", beta), ("gamma", gamma)) for r in await items.all(t, "u1",
            include_inactive=True) if r.id == i] == ["archived", "archived"]


async def test_the_search_reads_active_items_with_vectors_and_superseded_ones_in_one_call(stores: Stores) -> None:
    items = stores.items
    old = await add_item(items, "acme", "u1", "s1", _item("user.diet", "Vegetarian"), _vec(1))
    new = await add_item(items, "acme", "u1", "s1", _item("user.diet", "Vegan"), _vec(2), supersedes=[old])
    await add_item(items, "acme", "u1", "s1", _item("p.c", "Minor", importance=0.1), _vec(3))  # archived below
    await add_item(items, "acme", "u2", "s1", _item("user.diet", "Pescatarian"), _vec(4))  # another user's
    assert await items.archive_stale(time.time() + 1, 0.3) == 1  # neither active nor superseded now
    active, superseded = await items.active_and_superseded("acme", "u1")
    alone = await items.active_with_vectors("acme", "u1")
    assert [r for r, _ in active] == [r for r, _ in alone] and [r.id for r, _ in active] == [new]
    assert all(np.array_equal(a, b) for (_, a), (_, b) in zip(active, alone, strict=True))
    assert superseded == [r for r in await items.all("acme", "u1", include_inactive=True) if r.status == "superseded"]
    assert [(r.id, r.superseded_by) for r in superseded] == [(old, new)]
    assert await items.active_and_superseded("acme", "nobody") == ([], [])


async def _fill(stores: Stores, user: str) -> None:
    frag = [NewFragment("h1", "user", "I am vegetarian", "i am vegetarian", 0, 4)]
    await stores.fragments.add("acme", user, "s1", frag, np.stack([_vec(5)]))
    first = await add_item(stores.items, "acme", user, "s1", _item("user.diet", "Vegetarian"), _vec(1))
    await add_item(stores.items, "acme", user, "s1", _item("user.diet", "Vegan"), _vec(2), supersedes=[first])
    summary = SummaryRow("sum-1", 0, "they talked", 3, 0, 2)
    await stores.sessions.save_prefix("acme", user, "s1", "c1", 2, [summary], [summary])
    await stores.traces.save("acme", user, "s1", "t1", {"why": "x"})
    assert await stores.cursors.claim("acme", cursor_key(user, "s1"), 0, "x", 30)
    await stores.cursors.finish("acme", cursor_key(user, "s1"), "x", 2)


async def test_export_forget_and_restore_round_trip(stores: Stores) -> None:
    await _fill(stores, "u1")
    await stores.fragments.add("acme", "u2", "s9", [NewFragment("h9", "user", "other", "other", 0, 1)],
                               np.stack([_vec(9)]))
    exported = await stores.users.export("acme", "u1")
    assert [i["content"] for i in exported["items"]] == ["Vegetarian", "Vegan"]
    assert exported["items"][0]["superseded_by"] == exported["items"][1]["id"]
    assert [f["hash"] for f in exported["fragments"]] == ["h1"]
    assert exported["sessions"][0]["extraction_cursor"] == 2
    assert exported["sessions"][0]["prefixes"][0]["summary_ids"] == ["sum-1"]
    assert exported["traces"][0]["data"] == {"why": "x"}
    assert [e["event"] for e in exported["items"][0]["history"]] == ["created", "superseded"]
    assert (await stores.users.session_activity("acme", "s1"))["users"] == ["u1"]

    generation = (await stores.fragments.load_since("acme", "u1", 0, 10))[0]
    counts = await stores.users.forget("acme", "u1")
    assert {k: counts[k] for k in ("vectors", "fragments", "items", "summaries", "prefixes", "traces",
                                   "extraction_cursors")} == {
        "vectors": 3, "fragments": 1, "items": 2, "summaries": 1, "prefixes": 1, "traces": 1,
        "extraction_cursors": 1}
    assert (await stores.fragments.load_since("acme", "u1", 0, 10)) == (generation + 1, [])
    assert await stores.users.session_activity("acme", "s1") is None
    assert await stores.fragments.count("acme", "u2") == 1  # another user untouched

    vectors = np.stack([_vec(1), _vec(2)]), np.stack([_vec(5)])
    for f in exported["fragments"]:  # what the caller computes (admin/memories.py)
        f["terms"] = f["text"].lower()
    for i in exported["items"]:
        i["terms"], i["expires"] = i["content"].lower(), None
    restored = await stores.users.restore("acme", "u1", exported, *vectors)
    assert restored == {"fragments": 1, "items": 2, "summaries": 1, "prefixes": 1, "traces": 1}
    again = await stores.users.restore("acme", "u1", exported, *vectors)
    assert again == dict.fromkeys(restored, 0)
    back = await stores.users.export("acme", "u1")
    for f in exported["fragments"]:
        del f["terms"]
    for part in ("fragments", "sessions", "traces"):
        assert _without_ids(back[part]) == _without_ids(exported[part])
    assert [(i["content"], i["status"]) for i in back["items"]] == [
        ("Vegetarian", "superseded"), ("Vegan", "active")]
    assert back["items"][0]["superseded_by"] == back["items"][1]["id"]
    assert [i["history"] for i in back["items"]] == [i["history"] for i in exported["items"]]  # as it was


def _without_ids(rows: Any) -> Any:
    if isinstance(rows, list):
        return [_without_ids(r) for r in rows]
    if isinstance(rows, dict):
        return {k: _without_ids(v) for k, v in rows.items() if k != "id"}
    return rows


async def test_a_forget_racing_new_fragments_leaves_nothing_of_the_user(stores: Stores) -> None:
    await _fill(stores, "u1")
    frags = [NewFragment(f"n{i}", "user", f"more {i}", f"more {i}", i, 2) for i in range(20)]
    await asyncio.gather(
        stores.users.forget("acme", "u1"),
        stores.fragments.add("acme", "u1", "s2", frags, np.stack([_vec(i) for i in range(20)])),
    )
    # Either order is fine: the fragments came after the forget or were taken by it.
    assert await stores.fragments.count("acme", "u1") in (0, 20)
    assert await stores.items.all("acme", "u1", include_inactive=True) == []
