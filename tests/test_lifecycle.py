"""Lifecycle decisions: dedup, conflicts, expiry and staleness, all pure."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime

import numpy as np
import pytest

from proxy.memory.lifecycle import Decision, ExistingItem, Vector, decide, is_expired, same_value
from proxy.memory.memory_schema import MemoryItem

NOW = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)
DEDUP = 0.92


def at_cosine(cos: float) -> Vector:
    """A unit vector whose cosine with ``BASE`` is ``cos``."""
    return np.array([cos, math.sqrt(1 - cos * cos), 0.0])


BASE = at_cosine(1.0)
FAR = np.array([0.0, 0.0, 1.0])


def item(content: str, key: str, kind: str = "preference") -> MemoryItem:
    return MemoryItem(type=kind, content=content, key=key)  # type: ignore[arg-type]


def stored(id: str, content: str, key: str, vector: Vector = FAR, status: str = "active") -> ExistingItem:
    return ExistingItem(id=id, key=key, content=content, vector=vector, status=status)


def test_nothing_stored_adds() -> None:
    assert decide(item("The user likes tea.", "user.preference.tea"), BASE, [], DEDUP) == Decision(
        "add", (), "new fact"
    )


def test_a_near_duplicate_under_another_key_merges() -> None:
    old = stored("m1", "The user enjoys green tea every morning.", "user.preference.green_tea", at_cosine(0.95))
    new = item("Every morning the user enjoys green tea.", "user.preference.morning_tea")
    decision = decide(new, BASE, [old], DEDUP)
    assert (decision.action, decision.target_ids) == ("merge", ("m1",))


def test_below_the_threshold_adds() -> None:
    old = stored("m1", "The user enjoys green tea.", "user.preference.green_tea", at_cosine(0.90))
    assert decide(item("The user enjoys black coffee.", "user.preference.coffee"), BASE, [old], DEDUP).action == "add"


def test_same_key_new_value_supersedes_even_when_vectors_are_close() -> None:
    old = stored("m1", "The user loves spicy food.", "user.preference.spicy_food", at_cosine(0.97))
    new = item("The user no longer eats spicy food.", "user.preference.spicy_food")
    assert decide(new, BASE, [old], DEDUP) == Decision("supersede", ("m1",), "same key, new value")


def test_a_value_for_a_while_is_added_beside_a_standing_one_and_replaces_one_that_does_not_stand() -> None:
    vegan = ExistingItem("m1", "user.diet", "The user is vegan.", FAR, standing=True)
    this_week = MemoryItem(type="entity", category="health", standing=False, content="The user is vegetarian.",
                           key="user.diet", expires_at="2026-11-09T12:00:00+00:00")
    assert decide(this_week, BASE, [vegan], DEDUP).action == "add"  # vegan again once the week is over
    assert decide(this_week, BASE, [replace(vegan, standing=False)], DEDUP).target_ids == ("m1",)
    for_good = this_week.model_copy(update={"expires_at": None, "standing": True})
    assert decide(for_good, BASE, [vegan], DEDUP) == Decision("supersede", ("m1",), "same key, new value")


def test_same_key_same_value_merges() -> None:
    old = stored("m1", "The user is allergic to peanuts.", "user.allergy.peanut", FAR)
    new = item("The user has a peanut allergy", "user.allergy.peanut", "entity")
    assert decide(new, BASE, [old], DEDUP) == Decision("merge", ("m1",), "same key, same value")


def test_every_active_holder_of_the_key_is_superseded() -> None:
    olds = [
        stored("m1", "The user's name is Al.", "user.name"),
        stored("m2", "The user's name is Alan.", "user.name"),
        stored("m3", "The user's name is Albert.", "user.name", status="superseded"),
    ]
    decision = decide(item("The user's name is Alice.", "user.name", "entity"), BASE, olds, DEDUP)
    assert (decision.action, decision.target_ids) == ("supersede", ("m1", "m2"))


def test_inactive_items_are_ignored() -> None:
    olds = [
        stored("m1", "The user likes tea.", "user.preference.tea", BASE, status="superseded"),
        stored("m2", "The user likes tea.", "user.preference.tea", BASE, status="archived"),
    ]
    assert decide(item("The user likes tea.", "user.preference.tea"), BASE, olds, DEDUP).action == "add"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("The user's card ends in 8865.", "The user's card ends in 1234."),
        ("The user likes spicy food.", "The user doesn't like spicy food."),
        ("用户喜欢吃辣。", "用户不吃辣。"),
    ],
)
def test_close_vectors_with_different_numbers_or_polarity_are_two_facts(old: str, new: str) -> None:
    existing = stored("m1", old, "user.a", at_cosine(0.99))
    assert decide(item(new, "user.b"), BASE, [existing], DEDUP).action == "add"


def test_vectors_of_another_dimension_are_not_compared() -> None:
    old = stored("m1", "The user likes tea.", "user.preference.tea_old", np.array([1.0, 0.0]))
    assert decide(item("The user likes tea.", "user.preference.tea"), BASE, [old], DEDUP).action == "add"


def test_same_value_ignores_case_punctuation_articles_and_plurals() -> None:
    assert same_value("The user is allergic to peanuts.", "the user has a peanut allergy")
    assert same_value("用户对花生过敏。", "用户对花生过敏")
    assert not same_value("The user prefers window seats.", "The user prefers aisle seats.")


@pytest.mark.parametrize(
    ("expires_at", "expired"),
    [
        (None, False),
        ("2026-11-02T11:59:59+00:00", True),
        ("2026-11-02T12:00:00+00:00", True),
        ("2026-11-02T12:00:01+00:00", False),
        ("2026-11-02T13:00:00+02:00", True),  # 11:00 UTC
        ("2026-11-02T11:00:00", True),  # naive means UTC
        ("2026-11-02", False),  # a bare date is valid through that day
        ("2026-11-01", True),
        ("next week", False),  # unreadable never deletes
        (datetime(2026, 11, 1, tzinfo=UTC), True),
    ],
)
def test_is_expired(expires_at: str | datetime | None, expired: bool) -> None:
    assert is_expired(expires_at, NOW) is expired


def test_is_expired_accepts_a_naive_now() -> None:
    assert is_expired("2026-11-02T11:00:00+00:00", NOW.replace(tzinfo=None))


def test_slot_keys_know_the_keys_the_old_slug_cut() -> None:
    from proxy.memory.lifecycle import slot_keys

    assert "user.preference.ater" in slot_keys("user.preference.theater")
    assert "user.allergy.nimals_with_fur" in slot_keys("user.allergy.animals_with_fur")
    assert "user.city" in slot_keys("user.city")
    assert "user.preference.pear" not in slot_keys("user.preference.apple")
    assert "ser.city" not in slot_keys("user.city")  # the namespace was never a slug
    assert "user.preference.apple" not in slot_keys("user.preference.pple")  # only old → new, not the reverse


@pytest.mark.parametrize("key", ["user.likes", "user.preference", "melanie.activities", "user.allergies", "user.facts",
                                 "caroline.hobby", "user.health", "likes"])
def test_two_facts_sharing_a_key_that_names_a_kind_of_fact_are_two_facts(key: str) -> None:
    old = stored("m1", "The user likes hiking in the Alps.", key, at_cosine(0.4))
    new = item("The user likes jazz records from the fifties.", key)
    assert decide(new, BASE, [old], DEDUP).action == "add"
    # The same words again still merge, by their vectors: nothing is stored twice.
    again = item("The user likes hiking in the Alps.", key)
    assert decide(again, BASE, [stored("m1", again.content, key, BASE)], DEDUP).action == "merge"


@pytest.mark.parametrize("key", ["user.location.home", "user.diet", "user.name", "user.cat.allergy.peanut",
                                 "user.preference.spicy_food", "user.deadline.delivery", "user.language.reply",
                                 "user.medication.diabetes", "user.glasses", "user.address"])
def test_a_key_that_names_one_fact_is_a_slot(key: str) -> None:
    old = stored("m1", "The old value of the fact.", key, at_cosine(0.3))
    assert decide(item("A new value of the fact.", key), BASE, [old], DEDUP).action == "supersede"


def test_a_slot_is_held_by_one_the_user_and_someone_else_never_supersede_each_other() -> None:
    mine = ExistingItem("m1", "user.diet", "The user is vegetarian.", FAR)
    sons = MemoryItem(type="entity", category="relationship", about="the user's son", key="user.diet",
                      content="The user's son eats meat.")
    assert decide(sons, BASE, [mine], DEDUP).action == "add"
    theirs = ExistingItem("m2", "user.diet", "The user's son is vegan.", FAR, about="the user's son")
    assert decide(sons, BASE, [theirs], DEDUP).action == "supersede"
