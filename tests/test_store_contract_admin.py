"""What the admin API and the inspector read keeps one contract on SQLite and on PostgreSQL.

Item history (written by each database's triggers), hand edits, listings
with their cursors, usage upserts, recent traces, fragment sources: every
test runs on both stores (``stores`` fixture) and expects the same answer.
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np

from proxy.store.records import ItemWrite, NewFragment, NewItem, SummaryRow
from tests.store_backends import DIM, Stores, add_item


def _item(key: str, content: str, importance: float = 0.5) -> NewItem:
    return NewItem("preference", key, content, content.lower(), importance, 0.9, "extraction", None, None,
                   (1,), (f"h-{key}",))


def _vec(seed: int) -> Any:
    v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def _events(history: list[dict[str, Any]]) -> list[tuple[str, Any, dict[str, Any]]]:
    return [(e["event"], e["by"], e["detail"]) for e in history]


async def test_history_records_created_merged_superseded_and_edited(stores: Stores) -> None:
    old = await add_item(stores.items, "acme", "ana", "s1", _item("diet", "Vegetarian"), _vec(1))
    await stores.edits.credit("acme", "ana", old, "admin:ops")
    _, merged = await stores.items.remember("acme", "ana", "s1", _item("diet", "Vegetarian"), _vec(1),
                                            lambda active: ItemWrite(merge_into=old))
    assert merged == old
    new = await add_item(stores.items, "acme", "ana", "s1", _item("diet", "Vegan"), _vec(2), supersedes=[old])
    assert await stores.edits.edit("acme", "ana", new, {"content": "Vegan, mostly", "importance": 0.9},
                                   _vec(3), "admin:ops")
    assert _events(await stores.edits.history("acme", "ana", old)) == [
        ("created", "admin:ops", {"content": "Vegetarian", "type": "preference", "importance": 0.5}),
        ("merged", None, {"seen_count": 2}),
        ("superseded", None, {"superseded_by": new}),
    ]
    assert _events(await stores.edits.history("acme", "ana", new)) == [
        ("created", "extraction", {"content": "Vegan", "type": "preference", "importance": 0.5}),
        ("edited", "admin:ops", {"content": {"from": "Vegan", "to": "Vegan, mostly"},
                                 "importance": {"from": 0.5, "to": 0.9}}),
    ]
    (row,) = [r for r, v in await stores.items.active_with_vectors("acme", "ana")]
    assert (row.content, row.importance) == ("Vegan, mostly", 0.9)
    assert np.allclose(dict((r.id, v) for r, v in await stores.items.active_with_vectors("acme", "ana"))[new],
                       _vec(3))
    # Another user's id, an unknown item: nothing edited, no history shown.
    assert not await stores.edits.edit("acme", "bob", new, {"importance": 0.1}, None, "x")
    assert await stores.edits.history("acme", "bob", new) == []
    assert await stores.forgetting.memory("acme", "ana", new) is not None
    assert await stores.edits.history("acme", "ana", new) == []


async def _populate(stores: Stores) -> None:
    for n, user in enumerate(("cy", "ana", "bob", "dee")):
        frag = NewFragment(f"f-{user}", "user", "hello", "hello", 0, 1)
        await stores.fragments.add("acme", user, f"{user}-s1", [frag], np.stack([_vec(n)]), created=100.0 + n)
    await stores.traces.save("acme", "eve", "eve-s", "t-eve", {"query": "hi", "candidates": [1, 2]})
    await stores.traces.save("acme", "ana", "ana-s2", "t-ana", {"degraded": "store", "injected": [1]})
    await add_item(stores.items, "acme", "bob", None, _item("a", "A", 0.2), _vec(1))
    await add_item(stores.items, "acme", "bob", None, _item("b", "B", 0.9), _vec(2))
    summary = SummaryRow("sum-1", 0, "earlier", 2, 0, 4)
    await stores.sessions.save_prefix("acme", "ana", "ana-s1", "c1", 4, [summary], [summary])
    await add_item(stores.items, "globex", "zed", None, _item("z", "Z"), _vec(5))


async def test_listings_page_users_and_list_sessions_items_and_tenants(stores: Stores) -> None:
    await _populate(stores)
    assert await stores.listings.tenants() == ["acme", "globex"]
    first = await stores.listings.users("acme", None, 2)
    assert [u["id"] for u in first] == ["ana", "bob"]
    rest = await stores.listings.users("acme", first[-1]["id"], 10)
    assert [u["id"] for u in rest] == ["cy", "dee", "eve"]
    bob = first[1]
    assert (bob["memories"], bob["memories_total"], bob["fragments"], bob["sessions"], bob["requests"]) == (
        2, 2, 1, 1, 0)
    assert await stores.listings.user("acme", "nobody") is None
    assert (await stores.listings.user("acme", "eve") or {})["requests"] == 1
    sessions = await stores.listings.sessions("acme", "ana")
    assert [(s["id"], s["fragments"], s["requests"], s["summaries"]) for s in sessions] == [
        ("ana-s2", 0, 1, 0), ("ana-s1", 1, 0, 1)]
    page = await stores.listings.items("acme", "bob", after=None, limit=1)
    assert [r.content for r in page] == ["A"]
    assert [r.content for r in await stores.listings.items("acme", "bob", after=page[0].id, limit=5)] == ["B"]
    assert await stores.listings.items("acme", "bob", after=None, limit=5, kind="fact") == []
    assert [r.content for r in await stores.listings.important("acme", "bob", 0.5, 5)] == ["B"]


async def test_sessions_keep_their_place_as_they_go_on(stores: Stores) -> None:
    """A walk of a user's sessions page by page, while one it has passed and one ahead get new turns and a
    new one begins: every session once, none skipped (the order is by when each began)."""
    async def turn(session: str, n: int, created: float) -> None:
        frag = NewFragment(f"h-{session}-{n}", "user", "hello", "hello", n, 1)
        await stores.fragments.add("acme", "ana", session, [frag], np.stack([_vec(n)]), created=created)

    for n, session in enumerate(("s-a", "s-b", "s-c", "s-d")):
        await turn(session, 0, 100.0 + n)
    first = (await stores.listings.sessions("acme", "ana"))[:1]
    assert [s["id"] for s in first] == ["s-d"]
    await turn("s-d", 1, 200.0)  # passed already
    await turn("s-a", 1, 201.0)  # not reached yet: most recently active now
    await turn("s-e", 0, 202.0)  # begun during the walk: before its start
    seen = [first[0]["id"]]
    while True:
        rows = await stores.listings.sessions("acme", "ana")
        ids = [s["id"] for s in rows]
        rest = ids[ids.index(seen[-1]) + 1:][:1]
        if not rest:
            break
        seen.extend(rest)
    assert seen == ["s-d", "s-c", "s-b", "s-a"]
    now = await stores.listings.sessions("acme", "ana")
    assert now[0]["id"] == "s-e"
    a = next(s for s in now if s["id"] == "s-a")
    assert (a["first_seen"], a["last_seen"], a["fragments"]) == (100.0, 201.0, 2)


async def test_recent_traces_filter_and_page_newest_first(stores: Stores) -> None:
    for n in range(3):
        await stores.traces.save("acme", "ana", "s", f"t{n}", {"degraded": "x" if n == 1 else None,
                                                             "candidates": [1] * n})
        await asyncio.sleep(0.01)
    await stores.traces.save("globex", "ana", "s", "other", {})
    newest = await stores.traces.recent("acme", limit=2)
    assert [(t["id"], t["candidates"]) for t in newest] == [("t2", 2), ("t1", 1)]
    assert [t["id"] for t in await stores.traces.recent("acme", after="t1")] == ["t0"]
    assert [t["id"] for t in await stores.traces.recent("acme", degraded=True)] == ["t1"]
    assert [t["id"] for t in await stores.traces.recent("acme", degraded=False, user="ana")] == ["t2", "t0"]
    assert await stores.traces.recent("acme", session="elsewhere") == []


async def test_usage_adds_to_stored_counts_even_concurrently(stores: Stores) -> None:
    day = ("acme", "gpt-x", "2026-11-30")
    await asyncio.gather(*(stores.usage.add({day: {"requests": 1, "prompt_tokens": 10}}) for _ in range(8)))
    await stores.usage.add({("acme", "gpt-x", "2026-12-01"): {"requests": 1}, ("globex", "m", "2026-11-30"): {}})
    rows = await stores.usage.rows("acme")
    assert [(r["day"], r["requests"], r["prompt_tokens"], r["completion_tokens"]) for r in rows] == [
        ("2026-11-30", 8, 80, 0), ("2026-12-01", 1, 0, 0)]
    assert [r["tenant"] for r in await stores.usage.rows(None, since="2026-11-30", until="2026-11-30")] == [
        "acme", "globex"]


async def test_fragment_sources_and_suppress(stores: Stores) -> None:
    frags = [NewFragment(f"h{i}", "user", f"t{i}", f"t{i}", i, 1) for i in range(3)]
    await stores.fragments.add("acme", "ana", "s1", frags, np.stack([_vec(i) for i in range(3)]))
    ids = sorted(await stores.fragments.active_ids("acme", "ana"))
    assert await stores.fragments.sources("acme", "ana", ids[:2]) == {
        ids[0]: ("h0", "s1", "user"), ids[1]: ("h1", "s1", "user")}
    assert await stores.fragments.sources("acme", "bob", ids) == {}
    before = (await stores.fragments.load_since("acme", "ana", 0, 10))[0]
    await stores.fragments.suppress("acme", "ana", ["h1"])
    generation, rows = await stores.fragments.load_since("acme", "ana", 0, 10)
    assert generation > before and [r.fragment.hash for r in rows] == ["h0", "h2"]
    assert set(await stores.fragments.sources("acme", "ana", ids)) == {ids[0], ids[2]}


async def test_response_sessions_are_found_replaced_and_forgotten_with_the_user(stores: Stores) -> None:
    await stores.responses.save("acme", "ana", "resp_1", "s1", 4)
    await stores.responses.save("acme", "ana", "resp_1", "s1", 6)  # a retried response: the last write holds
    await stores.responses.save("acme", "bob", "resp_2", "s2", 2)
    found = await stores.responses.find("acme", "resp_1")
    assert (found.session, found.upto) == ("s1", 6)
    assert await stores.responses.find("globex", "resp_1") is None
    await stores.users.forget("acme", "ana")
    assert await stores.responses.find("acme", "resp_1") is None
    assert await stores.responses.find("acme", "resp_2") is not None
