"""One way to remember: decide and write in one transaction, whoever remembers (extraction or an admin)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.memory.extraction.remember import remember, repeats
from proxy.memory.memory_schema import MemoryItem
from proxy.memory.search.embedder import HashEmbedder
from proxy.store import open_store
from proxy.store.records import NewFragment

EMBEDDER = HashEmbedder(16)


async def embed(texts: Sequence[str]) -> np.ndarray:
    return EMBEDDER.embed(list(texts))


async def test_the_same_fact_remembered_at_once_is_stored_once(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "r.db"), 16)
    fact = MemoryItem(type="entity", content="The user's name is Carol.", key="user.name", source="user-stated")
    try:
        done = await asyncio.gather(
            *(remember(store.items, embed, "t", "u", "s", fact, dedup_cosine=0.9) for _ in range(8))
        )
        assert sorted(d.action for d in done) == ["added"] + ["merged"] * 7
        (only,) = await store.items.all("t", "u")
        assert only.seen_count == 8 and {d.item_id for d in done} == {only.id}
    finally:
        store.close()


async def test_a_new_value_supersedes_and_hides_the_turn_the_old_one_came_from(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "r.db"), 16)
    try:
        await store.fragments.add("t", "u", "s", [NewFragment("h1", "user", "I live in Oslo", "oslo", 0, 4)],
                                  EMBEDDER.embed(["I live in Oslo"]))
        old = MemoryItem(type="entity", content="The user lives in Oslo.", key="user.city", turns=(1,))
        first = await remember(store.items, embed, "t", "u", "s", old, dedup_cosine=0.9, fragment_hashes=["h1"])
        new = MemoryItem(type="entity", content="The user lives in Bergen.", key="user.city")
        second = await remember(store.items, embed, "t", "u", None, new, dedup_cosine=0.9)
        assert (first.action, second.action, second.superseded) == ("added", "superseded", (first.item_id,))
        assert [r.content for r in await store.items.all("t", "u")] == ["The user lives in Bergen."]
        assert await store.fragments.active_ids("t", "u") == set()
    finally:
        store.close()


async def test_a_key_the_old_slug_cut_is_the_same_slot(tmp_path: Path) -> None:
    # Stored before the slug fix: "apples" lost its "a", "animals with fur" too.
    store = open_store(str(tmp_path / "r.db"), 16)
    try:
        old = MemoryItem(type="preference", content="The user loves apples.", key="user.preference.pple")
        fur = MemoryItem(type="entity", content="The user is allergic to animals with fur.", key="user.allergy.nimals_with_fur")
        kept = MemoryItem(type="preference", content="The user loves pears.", key="user.preference.pear")
        for item in (old, fur, kept):
            await remember(store.items, embed, "t", "u", "s", item, dedup_cosine=0.99)
        changed = MemoryItem(type="preference", content="The user no longer likes apples.", key="user.preference.apple")
        again = MemoryItem(type="entity", content="The user is allergic to animals with fur.", key="user.allergy.animals_with_fur")
        assert (await remember(store.items, embed, "t", "u", None, changed, dedup_cosine=0.99)).action == "superseded"
        assert (await remember(store.items, embed, "t", "u", None, again, dedup_cosine=0.99)).action == "merged"
        assert sorted(r.content for r in await store.items.all("t", "u")) == [
            "The user is allergic to animals with fur.", "The user loves pears.", "The user no longer likes apples."]
    finally:
        store.close()


async def test_a_new_value_of_a_standing_fact_stands_in_its_place_unless_it_expires(tmp_path: Path) -> None:
    """A model files "accepted an offer from Spotify, I start Monday" as a plan that does not stand."""
    store = open_store(str(tmp_path / "r.db"), 16)
    try:
        job = MemoryItem(type="entity", category="identity", standing=True, content="The user works at Google.",
                         key="user.job")
        await remember(store.items, embed, "t", "u", "s", job, dedup_cosine=0.9)
        offer = MemoryItem(type="event", category="plan", standing=False, key="user.job",
                           content="The user accepted an offer from Spotify and starts on Monday.")
        assert (await remember(store.items, embed, "t", "u", "s", offer, dedup_cosine=0.9)).action == "superseded"
        trip = MemoryItem(type="event", category="plan", standing=False, key="user.trip", content="A trip to Rome.")
        await remember(store.items, embed, "t", "u", "s", trip, dedup_cosine=0.9)
        stands = {r.content: r.standing for r in await store.items.all("t", "u")}
        assert stands == {offer.content: True, trip.content: False}
        # A value that expires stays what it was filed as: it replaces, but does not stand for good.
        visit = MemoryItem(type="event", category="plan", standing=False, key="user.job", expires_at="2099-01-01",
                           content="The user works at the Oslo office until Friday.")
        await remember(store.items, embed, "t", "u", "s", visit, dedup_cosine=0.9)
        assert {r.content: r.standing for r in await store.items.all("t", "u")}[visit.content] is False
    finally:
        store.close()


@pytest.mark.parametrize(("old", "new", "reply", "repeated"), [
    ("The user lives in Boston.", "The user lives in Denver.", "Boston is a wonderful place to live!", True),
    ("The user lives in Boston.", "The user lives in Denver.", "Thanks for telling me.", False),
    ("The user lives in Boston.", "The user lives in Denver.", "Denver it is, then.", False),
    ("用户住在苏州。", "用户现在住在南京。", "苏州是个好地方！", True),
    ("用户住在苏州。", "用户现在住在南京。", "好的，记住了。", False),
])
def test_a_reply_repeats_a_replaced_value_when_it_names_a_word_of_its_own(
    old: str, new: str, reply: str, repeated: bool
) -> None:
    assert repeats(old, new, reply) is repeated


WORDS = st.sampled_from(["boston", "denver", "lives", "works", "nurse", "teacher", "coffee", "tea", "green"])


@given(old=st.lists(WORDS, min_size=1, max_size=4), new=st.lists(WORDS, min_size=1, max_size=4),
       reply=st.lists(WORDS, max_size=5))
def test_only_a_word_the_old_value_says_and_the_new_does_not_makes_a_repeat(
    old: list[str], new: list[str], reply: list[str]
) -> None:
    own = set(old) - set(new)
    assert repeats(" ".join(old), " ".join(new), " ".join(reply)) == bool(own & set(reply))
