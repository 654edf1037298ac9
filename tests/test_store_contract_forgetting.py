"""Forgetting keeps one contract on SQLite and on PostgreSQL (``store/forgetting.py``): every test runs on both.

A deleted memory hides (or, purged, deletes) the turns it came from and the
reply to each; a forgotten turn or session takes the memories drawn only
from it; purged turns leave digests that stop a resent conversation from
being stored again; a changed fact hides every turn that said it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from proxy.store.forgetting import drawn_only_from, trace_needles
from proxy.store.records import Forgot, ItemWrite, NewFragment, NewItem, SummaryRow
from tests.store_backends import DIM, Stores, add_item

# A conversation: the user states a fact, the assistant repeats it, then small talk.
TURNS = [
    ("user", "I am allergic to shellfish, remember it."),
    ("assistant", "Noted: you are allergic to shellfish."),
    ("user", "What is the weather like in spring?"),
    ("assistant", "Mild and often rainy in spring."),
]


def _vec(seed: int) -> Any:
    v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


async def _chat(stores: Stores, user: str, session: str, prefix: str = "") -> list[int]:
    """``TURNS`` of ``session`` (hashes ``<prefix>h0``…), returns their fragment ids in order."""
    frags = [NewFragment(f"{prefix}h{i}", role, text, text.lower(), i, 5) for i, (role, text) in enumerate(TURNS)]
    await stores.fragments.add("acme", user, session, frags, np.stack([_vec(i) for i in range(len(frags))]))
    listed = await stores.listings.fragments("acme", user, after=None, limit=100, session=session)
    return [f.id for f in listed]


def _item(key: str, content: str, hashes: tuple[str, ...], turns: tuple[int, ...] = (1,)) -> NewItem:
    return NewItem("constraint", key, content, content.lower(), 0.9, 0.9, "user-stated", None, None, turns, hashes)


async def _active_texts(stores: Stores, user: str) -> list[str]:
    return [x.fragment.text for x in (await stores.fragments.load_since("acme", user, 0, 100))[1]]


async def test_a_deleted_memory_hides_its_turns_and_the_reply_to_them(stores: Stores) -> None:
    await _chat(stores, "ana", "s1")
    await _chat(stores, "bob", "s1")
    item = await add_item(stores.items, "acme", "ana", "s1", _item("user.allergy", "Allergic to shellfish", ("h0",)),
                          _vec(9))
    generation = (await stores.fragments.load_since("acme", "ana", 0, 1))[0]
    assert await stores.forgetting.memory("acme", "bob", item) is None  # another user's id
    assert await stores.forgetting.memory("acme", "ana", item) == Forgot((item,), 2, False, 0)
    assert await stores.items.all("acme", "ana", include_inactive=True) == []
    again, _ = await stores.fragments.load_since("acme", "ana", 0, 100)
    assert again > generation  # every in-memory index drops them at its next search
    assert await _active_texts(stores, "ana") == [TURNS[2][1], TURNS[3][1]]
    hidden = await stores.listings.fragments("acme", "ana", after=None, limit=10, status="forgotten")
    assert [f.text for f in hidden] == [TURNS[0][1], TURNS[1][1]]  # kept, never recalled
    assert await stores.fragments.known("acme", "ana", ["h0"]) == {"h0"}  # a resend stores nothing
    assert len(await _active_texts(stores, "bob")) == 4
    assert await stores.forgetting.memory("acme", "ana", item) is None


async def test_a_deleted_memory_takes_the_memories_and_turns_that_say_it_again(stores: Stores) -> None:
    """``also``: more of the user's memories deleted with it, their turns hidden; another user's never."""
    await _chat(stores, "ana", "s1")
    await _chat(stores, "ana", "s2", prefix="b")
    await _chat(stores, "bob", "s3", prefix="c")
    item = await add_item(stores.items, "acme", "ana", "s1", _item("user.allergy", "Allergic to shellfish", ("h0",)),
                          _vec(9))
    again = await add_item(stores.items, "acme", "ana", "s2", _item("user.allergies", "Shellfish: hives", ("bh0",)),
                           _vec(10))
    bobs = await add_item(stores.items, "acme", "bob", "s3", _item("user.allergy", "Allergic to shellfish", ("ch0",)),
                          _vec(9))
    forgot = await stores.forgetting.memory("acme", "ana", item, turns=["bh2"], also=[again, bobs])
    assert forgot == Forgot((item, again), 6, False, 0)  # h0, bh0, bh2 and the reply after each
    assert await stores.items.all("acme", "ana", include_inactive=True) == []
    assert await _active_texts(stores, "ana") == [TURNS[2][1], TURNS[3][1]]
    assert [r.id for r in await stores.items.all("acme", "bob")] == [bobs]
    assert len(await _active_texts(stores, "bob")) == 4


async def test_a_purged_memory_deletes_its_turns_leaves_their_digests_and_drops_traces_that_show_them(
    stores: Stores,
) -> None:
    await _chat(stores, "ana", "s1")
    allergy = await add_item(stores.items, "acme", "ana", "s1",
                             _item("user.allergy", "Allergic to shellfish", ("h0",)), _vec(8))
    other = await add_item(stores.items, "acme", "ana", "s1", _item("user.memory", "Wants to be reminded",
                                                                   ("h0", "h2")), _vec(9))
    block = "<paperclip-memory>\n[2026-01-02]\nUser: I am allergic to shellfish, remember it.\n</paperclip-memory>"
    await stores.traces.save("acme", "ana", "s2", "t-shows", {"memory_block": block})
    await stores.traces.save("acme", "ana", "s2", "t-other", {"memory_block": "nothing of it"})
    await stores.traces.save("acme", "bob", "s2", "t-bob", {"memory_block": block})
    forgot = await stores.forgetting.memory("acme", "ana", allergy, purge=True)
    assert forgot == Forgot((allergy,), 2, True, 1)
    assert await _active_texts(stores, "ana") == [TURNS[2][1], TURNS[3][1]]
    assert [f.text for f in await stores.listings.fragments("acme", "ana", after=None, limit=10, status=None)] == [
        TURNS[2][1], TURNS[3][1]]
    assert await stores.traces.get("acme", "t-shows") is None
    assert await stores.traces.get("acme", "t-other") is not None and await stores.traces.get("acme", "t-bob")
    # The same words resent in that conversation are known; said in another, they are new.
    assert await stores.fragments.known("acme", "ana", ["h0", "h1", "h2"], "s1") == {"h0", "h1", "h2"}
    assert await stores.fragments.known("acme", "ana", ["h0", "h1", "h2"], "s9") == {"h2"}
    (kept,) = await stores.items.all("acme", "ana")
    assert (kept.id, kept.fragment_hashes) == (other, ["h2"])  # another memory of the turn stays
    counts = await stores.users.forget("acme", "ana")
    assert counts["forgotten_turns"] == 2
    assert await stores.fragments.known("acme", "ana", ["h0"], "s1") == set()


async def test_a_deleted_turn_takes_the_memories_drawn_only_from_it(stores: Stores) -> None:
    ids = await _chat(stores, "ana", "s1")
    only = await add_item(stores.items, "acme", "ana", "s1", _item("user.allergy", "Allergic to shellfish",
                                                                  ("h0",)), _vec(8))
    both = await add_item(stores.items, "acme", "ana", "s1", _item("user.weather", "Asks about weather",
                                                                  ("h0", "h2")), _vec(9))
    assert await stores.forgetting.fragment("acme", "bob", ids[0]) is None
    assert await stores.forgetting.fragment("acme", "ana", ids[0]) == Forgot((only,), 1, True, 0)
    assert await _active_texts(stores, "ana") == [t for _, t in TURNS[1:]]  # one turn, not its reply
    (kept,) = await stores.items.all("acme", "ana")
    assert (kept.id, kept.fragment_hashes) == (both, ["h2"])
    assert await stores.forgetting.fragment("acme", "ana", ids[2]) == Forgot((both,), 1, True, 0)
    assert await stores.items.all("acme", "ana") == []


async def test_a_forgotten_session_takes_its_turns_summaries_traces_and_memories(stores: Stores) -> None:
    await _chat(stores, "ana", "s1")
    await _chat(stores, "ana", "s2", prefix="b")
    await _chat(stores, "bob", "s1")
    drawn = await add_item(stores.items, "acme", "ana", "s1", _item("user.allergy", "Shellfish", ("h0",)), _vec(1))
    named = await add_item(stores.items, "acme", "ana", "s1", _item("user.name", "Ana", ()), _vec(2))
    elsewhere = await add_item(stores.items, "acme", "ana", "s1", _item("user.city", "Lyon", ("h2", "bh2")), _vec(3))
    mine = await add_item(stores.items, "acme", "ana", "s2", _item("user.pet", "A cat", ("bh0",)), _vec(4))
    by_hand = await add_item(stores.items, "acme", "ana", None, _item("user.job", "Nurse", ()), _vec(5))
    summary = SummaryRow("sum-s1", 0, "they talked of shellfish", 3, 0, 2)
    await stores.sessions.save_prefix("acme", "ana", "s1", "c1", 2, [summary], [summary])
    await stores.traces.save("acme", "ana", "s1", "t1", {"query": "hi"})
    await stores.traces.save("acme", "ana", "s2", "t2", {"query": "hello"})
    await stores.responses.save("acme", "ana", "resp_1", "s1", 4)
    assert await stores.cursors.claim("acme", "s1", 0, "x", 30)
    await stores.cursors.finish("acme", "s1", "x", 4)

    counts = await stores.forgetting.session("acme", "s1")
    assert counts == {"fragments": 8, "items": 2, "vectors": 10, "summaries": 1, "prefixes": 1, "traces": 1,
                      "response_sessions": 1}
    assert await stores.listings.fragments("acme", "ana", after=None, limit=10, session="s1", status=None) == []
    assert len(await _active_texts(stores, "ana")) == 4 and await _active_texts(stores, "bob") == []
    left = {r.id: r for r in await stores.items.all("acme", "ana", include_inactive=True)}
    assert set(left) == {elsewhere, mine, by_hand} and drawn not in left and named not in left
    assert (left[elsewhere].session, left[elsewhere].fragment_hashes) == ("s2", ["bh2"])  # said in s2 too
    assert await stores.sessions.describe("acme", "s1") is None
    assert await stores.users.session_activity("acme", "s1") is None
    assert await stores.traces.get("acme", "t2") is not None
    assert await stores.responses.find("acme", "resp_1") is None
    # How far it was mined stays (no text): the conversation resent is not mined again.
    assert await stores.cursors.cursor("acme", "s1") == 4
    assert await stores.fragments.known("acme", "ana", ["h0", "h3"], "s1") == {"h0", "h3"}
    assert await stores.forgetting.session("acme", "s1") == dict.fromkeys(counts, 0)


async def test_a_turn_said_again_in_another_session_stays_when_the_first_is_forgotten(stores: Stores) -> None:
    """A text is stored once for the user (by its hash): said again in s2, it is noted as said there too. So
    forgetting s1 moves the turn to s2, at its place there, with the memory drawn from it; a text said only
    in s1 goes, and forgetting s2 then takes the turn too."""
    await _chat(stores, "ana", "s1")
    again = [NewFragment("h0", "user", TURNS[0][1], TURNS[0][1].lower(), 3, 5),
             NewFragment("c1", "user", "Good morning.", "good morning.", 4, 3)]
    assert await stores.fragments.add("acme", "ana", "s2", again, np.stack([_vec(0), _vec(9)])) == 1
    drawn = await add_item(stores.items, "acme", "ana", "s1", _item("user.allergy", "Shellfish", ("h0",)), _vec(1))
    await stores.forgetting.session("acme", "s1")
    kept = await stores.listings.fragments("acme", "ana", after=None, limit=10, session="s2")
    assert [(f.text, f.position) for f in kept] == [(TURNS[0][1], 3), ("Good morning.", 4)]
    left = {r.id: r for r in await stores.items.all("acme", "ana")}
    assert (left[drawn].session, left[drawn].fragment_hashes) == ("s2", ["h0"])
    assert sorted(await _active_texts(stores, "ana")) == ["Good morning.", TURNS[0][1]]
    await stores.forgetting.session("acme", "s2")
    assert await _active_texts(stores, "ana") == [] and await stores.items.all("acme", "ana") == []


async def test_a_changed_fact_hides_every_turn_that_said_it(stores: Stores) -> None:
    frags = [NewFragment(f"h{i}", "user", f"I live in Boston, part {i}", f"boston {i}", i, 5) for i in range(3)]
    await stores.fragments.add("acme", "ana", "s1", frags, np.stack([_vec(i) for i in range(3)]))
    first = await add_item(stores.items, "acme", "ana", "s1", _item("user.home", "Lives in Boston", ("h0",)), _vec(1))
    # Said again in other words: merged into the same memory, whose sources now name both turns.
    _, merged = await stores.items.remember("acme", "ana", "s1", _item("user.home", "Lives in Boston", ("h1",)),
                                            _vec(1), lambda active: ItemWrite(merge_into=first))
    assert merged == first
    assert (await stores.items.get("acme", "ana", [first]))[first].fragment_hashes == ["h0", "h1"]
    await add_item(stores.items, "acme", "ana", "s1", _item("user.home", "Lives in Denver", ()), _vec(2),
                   supersedes=[first])
    assert await _active_texts(stores, "ana") == ["I live in Boston, part 2"]
    # An edit by hand changes the fact too: the turns that said the old value are hidden.
    edited = await add_item(stores.items, "acme", "ana", "s1", _item("user.diet", "Vegan", ("h2",)), _vec(3))
    assert await stores.edits.edit("acme", "ana", edited, {"importance": 0.5}, None, "x")
    assert await _active_texts(stores, "ana") == ["I live in Boston, part 2"]  # not a change of the fact
    assert await stores.edits.edit("acme", "ana", edited, {"content": "Vegetarian", "terms": "vegetarian"},
                                   None, "x")
    assert await _active_texts(stores, "ana") == []


async def test_a_replaced_guess_keeps_the_turn_it_was_read_from(stores: Stores) -> None:
    frags = [NewFragment(f"h{i}", "user", text, text.lower(), i, 5)
             for i, text in enumerate(["Gotta focus on why I started.", "I work as a nurse now."])]
    await stores.fragments.add("acme", "ana", "s1", frags, np.stack([_vec(i) for i in range(2)]))
    guess = await add_item(stores.items, "acme", "ana", "s1", _item("user.said.job", "Gotta focus", ("h0",)), _vec(1))
    await stores.items.remember("acme", "ana", "s1", _item("user.said.job", "A nurse", ("h1",)), _vec(2),
                                lambda active: ItemWrite(supersedes=(guess,), keep_turns_of=(guess,)))
    assert (await stores.items.get("acme", "ana", [guess]))[guess].status == "superseded"
    assert await _active_texts(stores, "ana") == ["Gotta focus on why I started.", "I work as a nurse now."]


async def test_the_replies_to_a_users_turns_are_found_by_their_hashes(stores: Stores) -> None:
    """The assistant's active reply right after each user turn named (the rule a deletion follows), what a
    supersede hides when it repeats the old value; none after an assistant's turn, none of another user's."""
    await _chat(stores, "ana", "s1")
    await _chat(stores, "ana", "s2", prefix="b")
    await _chat(stores, "bob", "s3", prefix="c")
    assert sorted(await stores.fragments.replies("acme", "ana", ["h0", "bh2", "bh1", "ch0"])) == [
        ("bh3", TURNS[3][1]), ("h1", TURNS[1][1])]
    await stores.fragments.suppress("acme", "ana", ["h1"])
    assert await stores.fragments.replies("acme", "ana", ["h0"]) == []  # hidden already
    assert await stores.fragments.replies("acme", "ana", []) == []


async def test_fragments_are_listed_in_id_order_by_session_and_status(stores: Stores) -> None:
    s1 = await _chat(stores, "ana", "s1")
    s2 = await _chat(stores, "ana", "s2", prefix="b")
    await stores.fragments.suppress("acme", "ana", ["h1"])
    listed = await stores.listings.fragments("acme", "ana", after=None, limit=3)
    assert [f.id for f in listed] == [s1[0], s1[2], s1[3]]
    first = listed[0]
    assert (first.session, first.role, first.text, first.position, first.status) == ("s1", "user", TURNS[0][1], 0,
                                                                                     "active")
    assert first.public()["object"] == "paperclip.fragment" and "hash" not in first.public()
    rest = await stores.listings.fragments("acme", "ana", after=s1[3], limit=10)
    assert [f.id for f in rest] == s2
    assert [f.id for f in await stores.listings.fragments("acme", "ana", after=None, limit=10, session="s2",
                                                          status=None)] == s2
    superseded = await stores.listings.fragments("acme", "ana", after=None, limit=10, status="superseded")
    assert [f.id for f in superseded] == [s1[1]]
    assert await stores.listings.fragments("acme", "bob", after=None, limit=10, status=None) == []


hashes = st.lists(st.sampled_from("abcdef"), max_size=4, unique=True)


@given(st.lists(st.tuples(st.sampled_from(["s1", "s2", None]), hashes), max_size=8), st.sets(st.sampled_from("abcdef")),
       st.sampled_from(["s1", None]))
def test_a_memory_goes_only_when_nothing_it_came_from_is_left(
    items: list[tuple[str | None, list[str]]], gone: set[str], session: str | None
) -> None:
    rows = [(i, s, h) for i, (s, h) in enumerate(items)]
    deleted, kept = drawn_only_from(rows, gone, session)
    for i, s, h in rows:
        left = [x for x in h if x not in gone]
        if i in deleted:
            assert (h and not left) or (not h and session is not None and s == session)
        else:
            assert left or not h
            assert kept.get(i, h) == left


def test_trace_needles_are_the_start_of_a_texts_first_line_as_json_spells_it() -> None:
    assert trace_needles(['She said "hi" — then left.\nmore', "ok", "ok"]) == ['She said \\"hi\\" — then left.']
    assert trace_needles(["x" * 200]) == ["x" * 60]


async def test_an_id_deleted_is_never_given_again(stores: Stores) -> None:
    """A retried DELETE must not find someone else's memory or turn: the newest deleted, its id stays unused."""
    first = await add_item(stores.items, "acme", "ana", "s1", _item("user.a", "Likes tea", ()), _vec(1))
    assert await stores.forgetting.memory("acme", "ana", first) is not None
    second = await add_item(stores.items, "acme", "ana", "s1", _item("user.b", "Likes jazz", ()), _vec(2))
    assert second > first
    last = max(await _chat(stores, "ana", "s1"))
    assert await stores.forgetting.fragment("acme", "ana", last) is not None
    later = await _chat(stores, "ana", "s2", prefix="n")
    assert min(later) > last


async def test_a_purge_takes_the_summary_chains_of_the_sessions_its_turns_were_in(stores: Stores) -> None:
    await _chat(stores, "ana", "s1")
    await _chat(stores, "ana", "s2", prefix="b")
    for session in ("s1", "s2"):
        summary = SummaryRow(f"sum-{session}", 0, "they talked of shellfish", 3, 0, 2)
        await stores.sessions.save_prefix("acme", "ana", session, f"c-{session}", 2, [summary], [summary])
    kept = await add_item(stores.items, "acme", "ana", "s1", _item("user.allergy", "Shellfish", ("h0",)), _vec(1))
    assert await stores.forgetting.memory("acme", "ana", kept) is not None  # hidden, not purged: chains stay
    assert await stores.sessions.describe("acme", "s1") is not None
    item = await add_item(stores.items, "acme", "ana", "s1", _item("user.allergy", "Shellfish", ("h0",)), _vec(1))
    assert await stores.forgetting.memory("acme", "ana", item, purge=True) is not None
    assert await stores.sessions.describe("acme", "s1") is None
    assert await stores.sessions.describe("acme", "s2") is not None  # the turns were not said there
    (turn, *_) = await _chat(stores, "ana", "s2", prefix="b")
    assert await stores.forgetting.fragment("acme", "ana", turn) is not None
    assert await stores.sessions.describe("acme", "s2") is None
