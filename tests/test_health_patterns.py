"""The rule extractor's health and diet statements, English and Chinese: standing facts for the profile."""

from __future__ import annotations

import datetime as dt

import pytest

from proxy.memory.extraction.rules import rule_extract
from proxy.memory.memory_schema import MemoryItem

NOW = dt.datetime(2026, 11, 30, tzinfo=dt.UTC)


def health(item: MemoryItem) -> bool:
    """A standing health fact: of the user ("health"), or of someone in their care ("relationship")."""
    return item.standing and item.category == ("health" if item.about_user else "relationship")


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
    (item,) = [i for i in rule_extract([(3, "user", said)], NOW) if i.key == key]
    assert (item.key, item.turns, item.expires_at) == (key, (3,), None)
    assert words in item.content and item.importance >= 0.9
    assert health(item)


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


@pytest.mark.parametrize(
    ("said", "key", "content"),
    [
        ("I keep kosher, so no pork or shellfish.", "user.diet", "The user keeps kosher."),
        ("I only eat halal food.", "user.diet", "The user eats only halal food."),
        ("I follow a strict vegetarian diet.", "user.diet", "The user is vegetarian."),
        ("I'm on a vegan diet these days.", "user.diet", "The user is vegan."),
        ("I'm no longer vegetarian.", "user.diet", "The user is no longer vegetarian."),
        ("I'm not vegan anymore, I eat fish now.", "user.diet", "The user is no longer vegan."),
        ("I'm expecting a baby in March!", "user.health.pregnancy", "The user is pregnant."),
        ("I'm expecting my first child in May.", "user.health.pregnancy", "The user is pregnant."),
        ("I take warfarin every day.", "user.health.medication.warfarin", "The user takes warfarin."),
        ("I'm on blood thinners since my surgery.", "user.health.medication.blood_thinner",
         "The user takes blood thinners."),
        ("I can't eat pork for religious reasons.", "user.diet.pork", "The user can't eat pork."),
        ("My cat Luna can't eat chicken, she's allergic.", "user.cat_luna.diet.chicken",
         "The user's cat Luna can't eat chicken."),
        ("Our dog Rex has a severe allergy to beef.", "user.dog_rex.allergy.beef", "The user's dog Rex is allergic to beef."),
        ("My son has a peanut allergy.", "user.son.allergy.peanut", "The user's son is allergic to peanut."),
        ("我的猫不能吃鸡肉。", "user.cat.diet.鸡肉", "用户的猫不能吃鸡肉。"),
        ("我在服用华法林。", "user.health.medication.华法林", "用户在服用华法林。"),
        ("我怀了宝宝，很开心。", "user.health.pregnancy", "用户怀孕了。"),
        ("我不吃素了。", "user.diet", "用户不再吃素了。"),
    ],
)
def test_more_ways_of_saying_a_health_fact(said: str, key: str, content: str) -> None:
    """A diet kept or ended, a pregnancy expected, a medication, a food someone in the user's care must avoid."""
    (item,) = [i for i in rule_extract([(2, "user", said)], NOW) if i.key == key]
    assert item.content == content and item.importance >= 0.9 and item.expires_at is None
    assert health(item)


@pytest.mark.parametrize(
    "said",
    [
        "I can't eat another bite.", "I can't drink tonight, I'm driving.", "I can't have that.",
        "I can't eat anything right now.", "I'm expecting a call from my boss.", "I take the bus every day.",
        "I am not vegetarian.", "I'm not vegan.", "Can I eat pork?", "My friend can't eat gluten?",
    ],
)
def test_a_remark_of_the_moment_is_no_health_fact(said: str) -> None:
    assert [i.key for i in rule_extract([(1, "user", said)], NOW) if health(i)] == []


def test_a_diet_ended_takes_the_diet_slot() -> None:
    first, second = rule_extract([(1, "user", "I'm strictly vegetarian."), (5, "user", "I'm no longer vegetarian.")], NOW)
    assert first.key == second.key == "user.diet" and "no longer" in second.content
