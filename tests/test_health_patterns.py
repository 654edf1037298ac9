"""The rule extractor's health and diet statements, English and Chinese: standing facts for the profile."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

import pytest

from proxy.memory.profile import kind_of
from proxy.memory.rules import rule_extract

NOW = dt.datetime(2026, 11, 30, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("said", "key", "words"),
    [
        ("I've been strictly vegetarian for ten years, just so you know.", "user.diet", "vegetarian"),
        ("I went vegan last year and I'm sticking to it.", "user.diet", "vegan"),
        ("I'm pregnant with our first baby, due in March.", "user.health.pregnancy", "pregnant"),
        ("I have celiac disease, so I can't eat gluten at all.", "user.health.celiac_disease", "celiac"),
        ("I'm lactose intolerant, milk makes me really sick.", "user.health.lactose_intolerant", "lactose"),
        ("I have type 2 diabetes and I watch my sugar.", "user.health.type_2_diabete", "diabetes"),
        ("I use a wheelchair, so places need step-free access.", "user.health.mobility", "wheelchair"),
        ("我吃素已经十年了，是严格的素食者。", "user.diet", "吃素"),
        ("我怀孕了，预产期是明年三月。", "user.health.pregnancy", "怀孕"),
        ("我有糖尿病，要控制血糖。", "user.health.糖尿病", "糖尿病"),
    ],
)
def test_a_health_or_diet_statement_is_a_standing_fact(said: str, key: str, words: str) -> None:
    (item,) = rule_extract([(3, "user", said)], NOW)
    assert (item.key, item.turns, item.expires_at) == (key, (3,), None)
    assert words in item.content and item.importance >= 0.9
    assert kind_of(SimpleNamespace(key=item.key, type=item.type)) == "health"  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "said", ["I am not vegetarian.", "My sister is vegan.", "Are you vegan?", "Is she pregnant?", "我妈妈有糖尿病吗？"]
)
def test_not_about_the_user_or_not_a_statement(said: str) -> None:
    assert [i for i in rule_extract([(1, "user", said)], NOW) if "diet" in i.key or "health" in i.key] == []
    assert rule_extract([(1, "assistant", "I'm vegan.")], NOW) == []


@pytest.mark.parametrize(
    ("earlier", "later", "key"),
    [
        ("I live in Boston these days.", "Big news: I moved to Denver last week!", "user.location.home"),
        ("我住在上海。", "我上周刚搬到杭州了！", "user.location.home"),
        ("我超级爱吃辣，越辣越好。", "我已经戒辣了，胃受不了。", "user.preference.spicy_food"),
        ("I love spicy food, the hotter the better.", "I've quit spicy food, my stomach can't take it.",
         "user.preference.spicy_food"),
    ],
)
def test_a_move_or_a_quit_takes_the_slot_of_the_earlier_value(earlier: str, later: str, key: str) -> None:
    first, second = rule_extract([(1, "user", earlier), (3, "user", later)], NOW)
    assert first.key == second.key == key and first.content != second.content and second.turns == (3,)
