"""The per-concept stores keep one contract on SQLite and on PostgreSQL: every test runs on both."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from proxy.store.records import EMPTY, NewFragment, NewItem, SummaryRow
from proxy.store.sqlite.sqlite_sessions import best_prefix
from tests.store_backends import DIM, Stores, add_item


def _fragments(n: int, start: int = 0) -> list[NewFragment]:
    return [
        NewFragment(f"h{i}", "user" if i % 2 else "assistant", f"text {i}", f"text {i}", i, 3)
        for i in range(start, start + n)
    ]


def _vectors(n: int, seed: int = 1) -> Any:
    v = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


async def test_fragments_are_added_once_and_load_in_id_order_with_their_vectors(stores: Stores) -> None:
    frags, vecs = _fragments(6), _vectors(6)
    assert await stores.fragments.add("acme", "u1", "s1", frags, vecs, created=100.0) == 6
    assert await stores.fragments.add("acme", "u1", "s2", _fragments(8), _vectors(8)) == 2
    assert await stores.fragments.known("acme", "u1", ["h1", "h7", "nope"]) == {"h1", "h7"}
    assert await stores.fragments.known("acme", "u2", ["h1"]) == set()
    generation, loaded = await stores.fragments.load_since("acme", "u1", 0, 5)
    assert generation == 0
    assert [x.fragment.hash for x in loaded] == ["h0", "h1", "h2", "h3", "h4"]
    first = loaded[0]
    assert (first.fragment.session, first.fragment.role, first.fragment.text, first.terms) == (
        "s1", "assistant", "text 0", "text 0")
    assert (first.fragment.position, first.fragment.tokens, first.fragment.created) == (0, 3, 100.0)
    assert np.allclose(np.stack([x.vector for x in loaded]), vecs[:5])
    _, rest = await stores.fragments.load_since("acme", "u1", loaded[-1].fragment.id, 100)
    assert [x.fragment.hash for x in rest] == ["h5", "h6", "h7"]
    # Each call's own limit, whichever came before (SQLite's is written into the statement).
    assert [x.fragment.hash for x in (await stores.fragments.load_since("acme", "u1", 0, 2))[1]] == ["h0", "h1"]
    assert await stores.fragments.count("acme", "u1") == 8


async def test_a_superseded_items_fragments_leave_the_active_set_and_move_the_generation(
    stores: Stores,
) -> None:
    await stores.fragments.add("acme", "u1", "s1", _fragments(4), _vectors(4))
    await stores.fragments.add("beta", "u1", "s1", _fragments(4), _vectors(4))
    before = await stores.fragments.active_ids("acme", "u1")
    fact = NewItem("preference", "k", "old fact", "old fact", 0.5, 0.5, "user", None, None, (1,), ("h1", "h2"))
    old = await add_item(stores.items, "acme", "u1", "s1", fact, _vectors(1)[0])
    await add_item(stores.items, "acme", "u1", "s1", fact, _vectors(1)[0], supersedes=[old])
    generation, loaded = await stores.fragments.load_since("acme", "u1", 0, 100)
    assert generation == 1
    assert [x.fragment.hash for x in loaded] == ["h0", "h3"]
    assert await stores.fragments.active_ids("acme", "u1") == {x.fragment.id for x in loaded} < before
    assert (await stores.fragments.load_since("beta", "u1", 0, 100))[0] == 0  # other tenant untouched
    assert len(await stores.fragments.active_ids("beta", "u1")) == 4


async def test_knn_ranks_only_the_users_fragments_by_cosine(stores: Stores) -> None:
    mine, theirs = _vectors(20, seed=2), _vectors(20, seed=3)
    await stores.fragments.add("acme", "u1", "s", _fragments(20), mine)
    await stores.fragments.add("acme", "u2", "s", _fragments(20), theirs)
    ids = [x.fragment.id for x in (await stores.fragments.load_since("acme", "u1", 0, 100))[1]]
    query = _vectors(1, seed=4)[0]
    found = await stores.fragments.knn("acme", "u1", query, 5)
    sims = mine @ query
    order = np.argsort(-sims)[:5]
    assert [i for i, _ in found] == [ids[j] for j in order]
    assert np.allclose([s for _, s in found], sims[order], atol=1e-5)


def _summary(i: int, start: int, end: int) -> SummaryRow:
    return SummaryRow(f"sum-{i}", 0, f"summary {i}", 10 + i, start, end)


async def test_the_longest_stored_prefix_of_the_incoming_chain_wins(stores: Stores) -> None:
    chain = [f"c{i}" for i in range(10)]
    one, two = _summary(1, 0, 4), _summary(2, 4, 6)
    await stores.sessions.save_prefix("acme", "u1", "s1", "c3", 4, [one], [one])
    await stores.sessions.save_prefix("acme", "u1", "s1", "c5", 6, [one, two], [two])
    state = await stores.sessions.longest_prefix("acme", "s1", chain)
    assert (state.upto, state.chain_hash, state.summaries) == (6, "c5", (one, two))
    branch = [*chain[:5], "edited", *chain[6:]]  # message 5 was edited: only the first prefix holds
    assert (await stores.sessions.longest_prefix("acme", "s1", branch)).summaries == (one,)
    assert await stores.sessions.longest_prefix("acme", "s1", chain[:3]) == EMPTY
    assert await stores.sessions.longest_prefix("beta", "s1", chain) == EMPTY
    described = await stores.sessions.describe("acme", "s1")
    assert described["watermark"] == 6
    assert [p["summary_ids"] for p in described["prefixes"]] == [["sum-1"], ["sum-1", "sum-2"]]
    assert [(s["id"], s["start"], s["end"], s["tokens"]) for s in described["summaries"]] == [
        ("sum-1", 0, 4, 11), ("sum-2", 4, 6, 12)]
    assert await stores.sessions.describe("acme", "nope") is None


async def test_traces_are_saved_replaced_read_by_tenant_and_pruned(stores: Stores) -> None:
    await stores.traces.save("acme", "u1", "s1", "t1", {"why": "first", "ü": [1, 2]})
    await stores.traces.save("acme", "u1", "s1", "t1", {"why": "second"})
    assert await stores.traces.get("acme", "t1") == {"why": "second"}
    assert await stores.traces.get("beta", "t1") is None
    assert await stores.traces.prune(3600) == 0
    await asyncio.sleep(0.05)
    assert await stores.traces.prune(0.01) == 1
    assert await stores.traces.get("acme", "t1") is None


@given(
    stored=st.lists(st.tuples(st.sampled_from("abcd"), st.integers(0, 8)), max_size=8),
    chain=st.lists(st.sampled_from("abcd"), max_size=8),
)
def test_the_longest_stored_prefix_the_chain_starts_with_is_chosen(
    stored: list[tuple[str, int]], chain: list[str]
) -> None:
    rows = [(h, upto, "[]") for h, upto in stored]
    best = best_prefix(rows, chain)
    matching = [upto for h, upto in stored if 0 < upto <= len(chain) and chain[upto - 1] == h]
    assert (best is None) == (not matching)
    if best is not None:
        assert best in rows and best[1] == max(matching) and chain[best[1] - 1] == best[0]
