"""The rule extractor's identity and taste statements said in more ways: homes, jobs, names, languages, switches."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

import pytest

from proxy.memory.extraction.rules import rule_extract
from proxy.memory.recall.profile import kind_of

NOW = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)


def kind(item: object) -> str | None:
    return kind_of(SimpleNamespace(key=item.key, type=item.type))  # type: ignore[arg-type,attr-defined]


@pytest.mark.parametrize(
    ("said", "key", "content", "expected_kind"),
    [
        ("We just relocated to Austin, Texas.", "user.location.home", "The user lives in Austin, Texas.", "identity"),
        ("I now live in Seattle.", "user.location.home", "The user lives in Seattle.", "identity"),
        ("My new address is 12 Baker Street, London.", "user.location.home",
         "The user's home address is 12 Baker Street, London.", "identity"),
        ("我现在住在北京。", "user.location.home", "用户住在北京。", "identity"),
        ("我的新地址是上海市长宁区100号。", "user.location.home", "用户的地址是上海市长宁区100号。", "identity"),
        ("I work as a software engineer at a bank.", "user.occupation", "The user is a software engineer.", "identity"),
        ("I'm a night-shift nurse.", "user.occupation", "The user is a nurse.", "identity"),
        ("我是一名护士。", "user.occupation", "用户是护士。", "identity"),
        ("Please always answer in French.", "user.language.reply", "The user wants replies in French.", "identity"),
        ("I speak Spanish natively.", "user.language", "The user's native language is Spanish.", "identity"),
        ("My daughter Mia is 6.", "user.daughter.name", "The user's daughter is called Mia.", "identity"),
        ("Our dog Rex loves long walks.", "user.dog.name", "The user's dog is called Rex.", "identity"),
        ("My favorite color is green.", "user.preference.favorite_color", "The user's favorite color is green.",
         "preference"),
        ("I'm not into sushi anymore.", "user.preference.sushi", "The user no longer likes sushi.", "preference"),
        ("I've gone off coffee.", "user.preference.coffee", "The user no longer likes coffee.", "preference"),
    ],
)
def test_a_standing_fact_said_another_way(said: str, key: str, content: str, expected_kind: str) -> None:
    (item,) = [i for i in rule_extract([(4, "user", said)], NOW) if i.key == key]
    assert (item.content, item.turns, item.expires_at, item.source) == (content, (4,), None, "user-stated")
    assert item.importance >= 0.5 and kind(item) == expected_kind


@pytest.mark.parametrize(
    "said",
    [
        "I'm a terrible cook.", "I'm a big fan of jazz.", "My wife I think is tired.", "I'm not into it anymore.",
        "Can you answer in French?", "We moved into a new flat.", "Please answer in French.",
    ],
)
def test_not_a_standing_fact(said: str) -> None:
    assert [(i.key, i.content) for i in rule_extract([(1, "user", said)], NOW) if kind(i) is not None] == []


def test_a_switch_ends_the_old_taste_and_takes_up_the_new() -> None:
    old, new = rule_extract([(3, "user", "I've switched from coffee to tea.")], NOW)
    assert (old.key, new.key) == ("user.preference.coffee", "user.preference.tea")
    assert "switched from coffee to tea" in old.content and "prefers tea" in new.content


def test_a_move_said_any_way_takes_the_home_slot() -> None:
    said = ["I live in Boston.", "We just relocated to Austin, Texas.", "My new address is 5 Elm Road, Austin."]
    items = rule_extract([(i, "user", s) for i, s in enumerate(said)], NOW)
    assert [i.key for i in items] == ["user.location.home"] * 3
    assert [i.turns for i in items] == [(0,), (1,), (2,)]
