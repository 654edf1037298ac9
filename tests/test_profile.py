"""The profile of standing facts: which items, in what order, within what budget, byte-stable."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy import config
from proxy.memory.recall.cards import item_card, render_block, render_card
from proxy.memory.recall.profile import (
    ProfileMemo,
    beyond,
    left_out,
    listing,
    profile_of,
    select_profile,
    standing,
)
from proxy.tokens import TokenCounter
from tests.admin_helpers import admin, ask
from tests.conftest import Proxy
from tests.fake_upstream import FakeUpstream

NOW = dt.datetime(2026, 11, 30, 12, tzinfo=dt.UTC)
DAY = 86_400.0
COUNTER = TokenCounter("gpt-4o-mini")


@dataclass(frozen=True)
class Item:
    id: int
    type: str
    key: str
    content: str
    importance: float = 0.8
    category: str = "other"
    standing: bool = True
    about: str = "user"
    source: str = "user-stated"
    expires_at: str | None = None
    status: str = "active"
    confidence: float = 0.9
    created: float = NOW.timestamp() - 10 * DAY
    updated: float = NOW.timestamp() - 10 * DAY


VEGETARIAN = Item(1, "constraint", "user.diet", "The user has been strictly vegetarian for ten years.", 0.9, "health")
CAT = Item(2, "entity", "user.cat.allergy.peanut", "The user's cat is allergic to peanuts.", 0.9, "relationship",
           about="the user's cat")
NAME = Item(3, "entity", "user.name", "The user's name is Ada.", 0.8, "identity")
TEA = Item(4, "preference", "user.preference.tea", "The user prefers tea over coffee.", 0.6, "preference")
STAIRS = Item(5, "constraint", "user.mobility.stairs", "The user cannot climb stairs since a knee operation.", 0.7,
              "health")
ZH = Item(6, "entity", "user.location.home", "用户住在杭州。", 0.6, "identity")
TRIP = Item(7, "event", "user.trip.paris", "The user went to Paris in May.", 0.9, "plan", standing=False)
PASSING = Item(8, "preference", "user.preference.blue", "The user liked the blue design.", 0.3, "preference",
               standing=False)
OLD = Item(9, "constraint", "user.diet.old", "The user eats fish.", 0.9, "health", status="superseded")
EXPIRED = Item(10, "task", "user.task.pack", "Pack the bags today.", 0.9, "task", expires_at="2026-11-01")
NOT_SAID = Item(11, "constraint", "user.diet", "The user skipped lunch today.", 0.9, "health", standing=False)
ALL = [VEGETARIAN, CAT, NAME, TEA, STAIRS, ZH, TRIP, PASSING, OLD, EXPIRED, NOT_SAID]


def test_guesses_take_the_room_the_sure_facts_leave_and_never_push_one_out() -> None:
    guesses = [Item(20 + n, "preference", "user.likes", f"I really enjoy {w}.", 0.9, "preference", confidence=0.5)
               for n, w in enumerate(("gardening", "chess", "baking", "cycling", "opera", "poetry", "rowing"))]
    budget = 120
    profile = select_profile([*guesses, TEA, NAME], NOW, COUNTER, budget)
    cost = {g.id: COUNTER.text(render_card(item_card(g)) + "\n") for g in guesses}
    kept = [g.id for g in guesses if g.id in profile.item_ids]
    left = [g.id for g in guesses if g.id not in profile.item_ids]
    assert {TEA.id, NAME.id} <= profile.item_ids  # sure facts of less importance than the guesses come first
    assert kept and left and profile.guessed == sum(cost[i] for i in kept)
    assert profile.tokens + min(cost[i] for i in left) > budget  # the guesses fill what is left: full, not stingy
    assert [i for i, _ in profile.guess_costs] == [f"i{i}" for i in kept]  # best first


def test_guesses_stay_beside_the_hits_best_first_in_the_room_they_leave() -> None:
    first = Item(30, "entity", "user.identity.facts", "I call Vancouver home.", 0.9, "identity", confidence=0.5,
                 updated=2.0)
    second = Item(31, "preference", "user.likes", "Long walks by the sea are my thing.", 0.9, "preference",
                  confidence=0.5, updated=1.0)
    profile = select_profile([first, second, NAME], NOW, COUNTER, 150)
    assert profile.guesses == {"i30", "i31"} and 0 < profile.guessed < profile.tokens
    costs = dict(profile.guess_costs)
    room = 800 - profile.tokens + profile.guessed
    assert profile.beside(room - profile.guessed, room) is profile  # the hits left just enough
    one = profile.beside(room - costs["i30"], room)  # room for the best guess alone
    assert one.item_ids == {NAME.id, first.id} and one.guesses == {"i30"} and one.guessed == costs["i30"]
    assert one.tokens == profile.tokens - costs["i31"]
    sure = profile.beside(room, room)
    assert sure.item_ids == {NAME.id} and sure.tokens == profile.tokens - profile.guessed and not sure.guesses
    assert [c.id for c in sure.cards] == [f"i{NAME.id}"]


def test_standing_facts_past_the_budget_follow_the_hits_those_the_question_matches_first() -> None:
    """A busy user's standing facts outgrow the profile: the rest take the room the hits leave, never a guess,
    never a fact shown already, the question's best match first."""
    guess = Item(10, "constraint", "user.allergies", "Shellfish gives me hives.", 0.9, "health", confidence=0.5)
    facts = [VEGETARIAN, CAT, NAME, TEA, STAIRS, ZH, TRIP, PASSING, OLD, guess]
    profile = select_profile(facts, NOW, COUNTER, 25)
    assert len(profile.item_ids) == 1
    rest = left_out(facts, profile, NOW)
    everything = beyond(rest, profile, [], [], lambda card: True, 8)
    assert [c.id for c in everything] == [f"i{f.id}" for f in standing(facts, NOW)
                                         if f.id not in profile.item_ids and f is not guess]
    asked = beyond(rest, profile, [item_card(NAME)], [TEA.id, TRIP.id, STAIRS.id], lambda card: True, 2)
    assert [c.id for c in asked] == ["i4", "i5"]  # asked first; the trip does not stand; the name is shown
    room = iter([True, False, True])
    assert [c.id for c in beyond(rest, profile, [], [], lambda card: next(room, True), 8)][:2] == [
        everything[0].id, everything[2].id]  # one that does not fit is skipped for the next


@given(st.lists(st.sampled_from([VEGETARIAN, CAT, NAME, TEA, STAIRS, ZH, TRIP, PASSING, OLD]), unique=True),
       st.integers(min_value=0, max_value=120), st.integers(min_value=0, max_value=8))
def test_nothing_beyond_the_profile_is_in_it_or_past_the_slots(facts: list[Item], budget: int, slots: int) -> None:
    profile = select_profile(facts, NOW, COUNTER, budget)
    shown = beyond(left_out(facts, profile, NOW), profile, [], [f.id for f in facts], lambda card: True, slots)
    ids = {int(c.id[1:]) for c in shown}
    assert len(shown) <= slots and not ids & profile.item_ids
    assert ids <= {f.id for f in standing(facts, NOW)}


def test_the_listing_shows_the_profile_then_the_facts_past_its_budget_and_none_when_it_is_off() -> None:
    facts = [VEGETARIAN, CAT, NAME, TEA, STAIRS, ZH, TRIP, PASSING, OLD]
    small = MEMORY.model_copy(update={"profile_budget_tokens": 25})
    profile, listed = listing(facts, small, COUNTER, NOW)
    assert [(c.id, within) for _, c, within in listed] == [
        *((c.id, True) for c in profile.cards), *((f"i{f.id}", False) for f in left_out(facts, profile, NOW))]
    assert all(c.id == f"i{f.id}" for f, c, _ in listed) and len(listed) == len(standing(facts, NOW))
    assert listing(facts, small.model_copy(update={"profile": False}), COUNTER, NOW)[1] == []


def test_standing_facts_are_the_active_unexpired_items_the_schema_says_stand() -> None:
    # Plans, passing remarks, superseded and expired items never stand; a key's text decides nothing.
    assert {i.id for i in standing(ALL, NOW)} == {1, 2, 3, 4, 5, 6}
    budget = Item(12, "preference", "user.budget.renovation", "The user's renovation budget is 20000 euros.",
                  0.7, "preference")
    loose = Item(13, "entity", "likes", "The user likes hiking.", 0.6, "preference")
    assert {i.id for i in standing([budget, loose, NOT_SAID], NOW)} == {12, 13}


def test_the_block_leads_with_health_then_identity_relationships_preferences() -> None:
    profile = select_profile(ALL, NOW, COUNTER, 1000)
    assert [c.id for c in profile.cards] == ["i1", "i5", "i3", "i6", "i2", "i4"]
    assert profile.item_ids == frozenset({1, 2, 3, 4, 5, 6})
    assert profile.cards[0].kind == "constraint" and profile.cards[0].source == "user said"
    assert profile.cards[0].date == "2026-11-20"
    # A fact about someone else says whom it is about, not that the user said it of themself.
    assert render_card(profile.cards[4]) == "[entity · about the user's cat · 2026-11-20] " + CAT.content


def test_a_small_budget_keeps_the_most_important_and_recent() -> None:
    fresh_tea = replace(TEA, importance=0.6, updated=NOW.timestamp())
    stale_tea = replace(TEA, id=11, key="user.preference.jazz", content="The user likes jazz.",
                        updated=NOW.timestamp() - 400 * DAY)
    one = COUNTER.text("[preference · user said · 2026-11-20] The user prefers tea over coffee.\n")
    profile = select_profile([stale_tea, fresh_tea], NOW, COUNTER, one)
    assert [c.id for c in profile.cards] == ["i4"] and profile.tokens <= one
    # Vegetarian (0.9) beats a preference (0.6) of the same age.
    assert select_profile([TEA, VEGETARIAN], NOW, COUNTER, one + 2).item_ids == {1}


def test_a_fact_that_does_not_fit_is_skipped_for_a_shorter_one_never_cut() -> None:
    long = replace(VEGETARIAN, content="The user is vegetarian " + "and very strict about it " * 30)
    profile = select_profile([long, NAME], NOW, COUNTER, 40)
    assert [c.id for c in profile.cards] == ["i3"]
    assert all("…" not in c.text for c in profile.cards)


def test_two_standing_facts_of_one_loose_key_both_stand() -> None:
    hiking = Item(12, "preference", "user.likes", "The user likes hiking.", 0.6, "preference")
    jazz = Item(13, "preference", "user.likes", "The user likes jazz.", 0.6, "preference")
    assert select_profile([hiking, jazz], NOW, COUNTER, 500).item_ids == {12, 13}


facts = st.builds(
    Item,
    id=st.integers(1, 10_000),
    type=st.sampled_from(["entity", "preference", "event", "task", "constraint"]),
    key=st.sampled_from(["user.name", "user.diet", "user.allergy.egg", "user.preference.tea",
                         "user.task.x", "user.trip", "user.preference.jazz", "user.location.home"]),
    category=st.sampled_from(["health", "identity", "relationship", "preference", "plan", "other"]),
    standing=st.booleans(),
    content=st.text(min_size=1, max_size=60),
    importance=st.floats(0, 1),
    created=st.floats(1.6e9, 1.7e9),
    updated=st.floats(1.6e9, 1.7e9),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(facts, max_size=12, unique_by=lambda f: f.id), st.integers(0, 400),
       st.integers(0, 3650), st.randoms(use_true_random=False))
def test_byte_stable_within_budget_whatever_the_clock_and_the_input_order(
    items: list[Item], budget: int, later_days: int, rnd: object
) -> None:
    profile = select_profile(items, NOW, COUNTER, budget)
    assert profile.tokens <= budget
    assert sum(COUNTER.text(c.text) for c in profile.cards) <= budget
    shuffled = list(items)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    later = NOW + dt.timedelta(days=later_days)
    again = select_profile(shuffled, later, COUNTER, budget)
    # Nothing expires in these items, so neither time nor order changes a byte.
    assert render_block(again.cards) == render_block(profile.cards)


MEMORY = config.from_dict({}, env={}).defaults.memory
expiring = st.builds(
    replace, facts, expires_at=st.one_of(st.none(), st.sampled_from(["2026-11-29", "2026-12-01", "2026-12-03"]))
)


@settings(max_examples=60, deadline=None)
@given(st.lists(expiring, max_size=10, unique_by=lambda f: f.id),
       st.lists(st.tuples(st.integers(0, 2), st.integers(-3 * 24, 5 * 24)), min_size=1, max_size=12))
def test_the_memo_answers_what_profile_of_would_whatever_the_clock_does(
    items: list[Item], calls: list[tuple[int, int]]
) -> None:
    """Versions come and go, the clock goes forward and back across expiries: the memo never shows a stale profile."""
    versions = [items, items[: len(items) // 2], [replace(i, importance=1.0) for i in items]]
    memo = ProfileMemo()
    for version, hours in calls:
        now = NOW + dt.timedelta(hours=hours)
        got = memo.of(version, versions[version], MEMORY, COUNTER, now)
        assert got == profile_of(versions[version], MEMORY, COUNTER, now)


def test_the_memo_costs_a_comparison_while_nothing_changes() -> None:
    memo = ProfileMemo()
    first = memo.of((3, 1.0), [VEGETARIAN, STAIRS], MEMORY, COUNTER, NOW)
    assert memo.of((3, 1.0), [], MEMORY, COUNTER, NOW + dt.timedelta(days=30)) is first  # the items are not read
    assert memo.of((4, 2.0), [], MEMORY, COUNTER, NOW).cards == ()  # a new version is
    tomorrow = replace(STAIRS, expires_at="2026-11-30")  # through today
    memo.of((5, 3.0), [tomorrow], MEMORY, COUNTER, NOW)
    assert memo.of((5, 3.0), [tomorrow], MEMORY, COUNTER, NOW + dt.timedelta(days=1)).cards == ()
    assert memo.of((5, 3.0), [tomorrow], MEMORY.model_copy(update={"profile": False}), COUNTER, NOW).cards == ()


def test_the_profile_keys_default_on_and_a_tenant_can_turn_it_off() -> None:
    from proxy.errors import ConfigError

    settings = config.from_dict(
        {"tenants": {"acme": {"api_keys": ["k"], "memory": {"profile": False, "profile_budget_tokens": 60}}}},
        env={},
    )
    assert (settings.defaults.memory.profile, settings.defaults.memory.profile_budget_tokens) == (True, 150)
    assert (settings.tenants[0].memory.profile, settings.tenants[0].memory.profile_budget_tokens) == (False, 60)
    with pytest.raises(ConfigError, match="profile_budget_tokens"):
        config.from_dict({"defaults": {"memory": {"profile_budget_tokens": 0}}}, env={})


def test_the_profile_endpoint_shows_the_standing_facts_and_a_tenant_can_turn_them_off(
    make_proxy: Callable[..., Proxy],
) -> None:
    proxy = make_proxy(tenants={"acme": {"memory": {"profile_budget_tokens": 60}}})
    proxy.wait_ready()
    with admin(proxy) as http:
        for body in (
            {"content": "The user has been strictly vegetarian for ten years.", "type": "constraint",
             "category": "health", "key": "user.diet", "importance": 0.9},
            {"content": "The user went to Porto in May.", "type": "event", "importance": 0.9},
            {"content": "The user liked the blue design.", "type": "preference", "importance": 0.3, "standing": False},
        ):
            assert http.post("/paperclip/v1/users/ada/memories", json=body).status_code == 201
        got = http.get("/paperclip/v1/users/ada/profile").json()
        assert got["object"] == "paperclip.profile" and got["enabled"] is True
        assert [d["key"] for d in got["data"]] == ["user.diet"]
        assert got["data"][0]["card"].endswith("] The user has been strictly vegetarian for ten years.")
        assert 0 < got["tokens"] <= got["budget_tokens"] == 60
        assert got["block"].startswith("<paperclip-memory>") and "vegetarian" in got["block"]
        assert http.get("/paperclip/v1/users/bob/profile").json()["data"] == []
    off = make_proxy(tenants={"acme": {"memory": {"profile": False}}})
    off.wait_ready()
    with admin(off) as http:
        body = {"content": "The user is vegetarian.", "type": "constraint", "category": "health", "key": "user.diet",
                "importance": 0.9}
        http.post("/paperclip/v1/users/ada/memories", json=body)
        got = http.get("/paperclip/v1/users/ada/profile").json()
        assert got["enabled"] is False and got["data"] == [] and got["block"] is None


BUSY = [  # a model's facts, each in 20-30 words (three fill the default profile)
    ("health", "The user is vegetarian and eats neither meat nor fish, so recipes and restaurants suggested to them "
               "should be fully vegetarian."),
    ("health", "The user has a serious peanut allergy; any food or snack suggested to them must contain no peanuts "
               "or peanut traces at all."),
    ("identity", "The user lives in Lyon, near the old town, which matters for local suggestions, day trips and "
                 "anything that depends on where they are."),
    ("identity", "The user works night shifts as a hospital nurse, so they sleep during the day and are free in the "
                 "late afternoon."),
    ("health", "The user uses a wheelchair and cannot manage stairs, so places and routes suggested to them need "
               "step-free access throughout."),
    ("preference", "The user dislikes phone calls and wants to be reached by email or text message for anything "
                   "arranged on their behalf."),
]


def test_a_busy_users_standing_facts_past_the_budget_follow_the_profile_and_are_listed(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream,
) -> None:
    """Through real sockets: six standing facts of a model's length, a profile that holds fewer; a question
    that names none of them gets every one, and the profile endpoint lists those past the budget as such."""
    proxy = make_proxy()
    with admin(proxy) as http:
        for category, content in BUSY:
            body = {"content": content, "type": "constraint", "category": category, "importance": 0.8}
            assert http.post("/paperclip/v1/users/ada/memories", json=body).status_code == 201
        got = http.get("/paperclip/v1/users/ada/profile").json()
    within = [d["within_budget"] for d in got["data"]]
    assert len(within) == len(BUSY) and 0 < within.count(True) < len(BUSY)
    assert within == sorted(within, reverse=True)  # the profile's own first, then those past its budget
    ask(proxy, "ada", "What's the capital of Australia?")
    sent = upstream.chat_requests()[-1].body.decode()
    assert all(content.split(",")[0] in sent for _, content in BUSY)


def test_what_stands_is_the_users_to_change_by_hand(make_proxy: Callable[..., Proxy]) -> None:
    proxy = make_proxy()
    proxy.wait_ready()
    with admin(proxy) as http:
        body = {"content": "The user cannot climb stairs.", "type": "constraint", "category": "health",
                "key": "user.mobility.stairs", "about": "user"}
        made = http.post("/paperclip/v1/users/ada/memories", json=body).json()["item"]
        assert (made["category"], made["standing"]) == ("health", True)  # a health fact stands by default
        assert [d["key"] for d in http.get("/paperclip/v1/users/ada/profile").json()["data"]] == ["user.mobility.stairs"]
        edited = http.patch(f"/paperclip/v1/users/ada/memories/{made['id']}", json={"standing": False})
        assert edited.status_code == 200 and edited.json()["standing"] is False
        assert http.get("/paperclip/v1/users/ada/profile").json()["data"] == []
        wrong = http.patch(f"/paperclip/v1/users/ada/memories/{made['id']}", json={"category": "medical"})
        assert wrong.status_code == 400 and wrong.json()["error"]["param"] == "category"


def test_a_fact_a_later_one_may_have_changed_is_marked_and_takes_only_the_room_left() -> None:
    moved = Item(30, "entity", "user.said.home", "Settled at last: we bought a house in York.", 0.5, "identity",
                 confidence=0.5, created=NOW.timestamp(), updated=NOW.timestamp())
    home = replace(ZH, content="The user rents a flat in Leeds.", importance=0.95)
    facts = [home, moved, NAME]
    profile = profile_of(facts, config.Memory(), COUNTER, NOW)
    assert profile.changed == {home.id}
    (card,) = [c for c in profile.cards if c.id == f"i{home.id}"]
    assert card.changed and not any(c.changed for c in profile.cards if c is not card)
    # Ranked first by importance, it is still the first left out when the room is short: after the guess.
    costs = {f.id: COUNTER.text(render_card(item_card(f, f is home)) + "\n") for f in facts}
    tight = select_profile(facts, NOW, COUNTER, costs[NAME.id] + costs[moved.id], profile.changed)
    assert tight.item_ids == {NAME.id, moved.id}
    assert home not in left_out(facts, tight, NOW)  # nor does it follow the profile beside the hits


def test_the_listing_shows_a_marked_fact_past_the_budget_marked() -> None:
    moved = Item(30, "entity", "user.said.home", "Settled at last: we bought a house in York.", 0.5, "identity",
                 confidence=0.5, created=NOW.timestamp(), updated=NOW.timestamp())
    home = replace(ZH, content="The user rents a flat in Leeds.")
    small = MEMORY.model_copy(update={"profile_budget_tokens": 12})  # room for the name's card only
    profile, listed = listing([home, moved, NAME], small, COUNTER, NOW)
    assert home.id not in profile.item_ids
    ((card, within),) = [(c, w) for f, c, w in listed if f is home]
    assert card.changed and not within
