"""The profile of standing facts: which items, in what order, within what budget, byte-stable."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy import config
from proxy.memory.recall.cards import render_block
from proxy.memory.recall.profile import ProfileMemo, kind_of, profile_of, select_profile, standing
from proxy.tokens import TokenCounter
from tests.admin_helpers import admin
from tests.conftest import Proxy

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
    source: str = "user-stated"
    expires_at: str | None = None
    status: str = "active"
    created: float = NOW.timestamp() - 10 * DAY
    updated: float = NOW.timestamp() - 10 * DAY


VEGETARIAN = Item(1, "constraint", "user.diet", "The user has been strictly vegetarian for ten years.", 0.9)
CAT = Item(2, "entity", "user.cat.allergy.peanut", "The user's cat is allergic to peanuts.", 0.9)
NAME = Item(3, "entity", "user.name", "The user's name is Ada.", 0.8)
TEA = Item(4, "preference", "user.preference.tea", "The user prefers tea over coffee.", 0.6)
TASK = Item(5, "task", "user.task.call_dentist", "The user wants to call the dentist by Friday.", 0.7)
ZH = Item(6, "entity", "user.location.home", "用户住在杭州。", 0.6)
TRIP = Item(7, "event", "user.trip.paris", "The user went to Paris in May.", 0.9)
PASSING = Item(8, "preference", "user.preference.blue", "The user liked the blue design.", 0.3)
OLD = Item(9, "constraint", "user.diet.old", "The user eats fish.", 0.9, status="superseded")
EXPIRED = Item(10, "task", "user.task.pack", "Pack the bags today.", 0.9, expires_at="2026-11-01")
GUESSED = Item(11, "constraint", "user.diet.vegan", "The user may be vegan.", 0.9, source="inferred")
ALL = [VEGETARIAN, CAT, NAME, TEA, TASK, ZH, TRIP, PASSING, OLD, EXPIRED, GUESSED]


def test_standing_facts_are_health_identity_preferences_and_open_tasks() -> None:
    assert [kind_of(i) for i in (VEGETARIAN, CAT, NAME, TEA, TASK, ZH, TRIP)] == [
        "health", "health", "identity", "preference", "task", "identity", None,
    ]
    assert kind_of(replace(TRIP, type="entity", key="user.dog.name")) == "identity"
    assert kind_of(replace(TRIP, type="entity", key="user.dog.breed")) is None
    # Events, passing remarks, inferences, superseded and expired items never stand.
    assert {i.id for i in standing(ALL, NOW)} == {1, 2, 3, 4, 5, 6}


def test_the_block_leads_with_health_then_identity_preferences_tasks() -> None:
    profile = select_profile(ALL, NOW, COUNTER, 1000)
    assert [c.id for c in profile.cards] == ["i1", "i2", "i3", "i6", "i4", "i5"]
    assert profile.item_ids == frozenset({1, 2, 3, 4, 5, 6})
    assert profile.cards[0].kind == "constraint" and profile.cards[0].source == "user said"
    assert profile.cards[0].date == "2026-11-20"


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


def test_one_fact_per_key() -> None:
    again = replace(VEGETARIAN, id=12, content="Vegetarian.", updated=VEGETARIAN.updated - DAY)
    assert select_profile([VEGETARIAN, again], NOW, COUNTER, 500).item_ids == {1}


facts = st.builds(
    Item,
    id=st.integers(1, 10_000),
    type=st.sampled_from(["entity", "preference", "event", "task", "constraint"]),
    key=st.sampled_from(["user.name", "user.diet", "user.allergy.egg", "user.preference.tea",
                         "user.task.x", "user.trip", "user.preference.jazz", "user.location.home"]),
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
    first = memo.of((3, 1.0), [VEGETARIAN, TASK], MEMORY, COUNTER, NOW)
    assert memo.of((3, 1.0), [], MEMORY, COUNTER, NOW + dt.timedelta(days=30)) is first  # the items are not read
    assert memo.of((4, 2.0), [], MEMORY, COUNTER, NOW).cards == ()  # a new version is
    tomorrow = replace(TASK, expires_at="2026-11-30")  # through today
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
             "key": "user.diet", "importance": 0.9},
            {"content": "The user went to Porto in May.", "type": "event", "importance": 0.9},
            {"content": "The user likes the colour blue.", "type": "preference", "importance": 0.3},
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
        body = {"content": "The user is vegetarian.", "type": "constraint", "key": "user.diet", "importance": 0.9}
        http.post("/paperclip/v1/users/ada/memories", json=body)
        got = http.get("/paperclip/v1/users/ada/profile").json()
        assert got["enabled"] is False and got["data"] == [] and got["block"] is None
