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


def test_a_diet_ended_in_chinese_is_the_diet_not_a_dislike_of_a_food() -> None:
    # A second reading of the same words, as a taste for "素", folded the diet's end into it as a near-repeat:
    # the diet it ended was never replaced.
    assert [i.key for i in rule_extract([(2, "user", "我不吃素了，现在什么都吃。")], NOW)] == ["user.diet"]


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


@pytest.mark.parametrize(
    ("said", "key", "content"),
    [
        ("I take levothyroxine once a day.", "user.health.medication.levothyroxine", "The user takes levothyroxine."),
        ("I take my thyroid pills every morning.", "user.health.medication.thyroid", "The user takes thyroid pills."),
        ("I was prescribed sertraline last year.", "user.health.medication.sertraline", "The user takes sertraline."),
        ("I'm on lisinopril for my blood pressure.", "user.health.medication.lisinopril", "The user takes lisinopril."),
        ("我长期服用阿司匹林。", "user.health.medication.阿司匹林", "用户在服用阿司匹林。"),
        ("I use a walker to get around.", "user.health.mobility", "The user uses a walker."),
        ("I get around in a mobility scooter.", "user.health.mobility", "The user uses a mobility scooter."),
        ("I rely on crutches.", "user.health.mobility", "The user uses crutches."),
        ("我出门要坐轮椅。", "user.health.mobility", "用户使用轮椅。"),
        ("I can't manage stairs.", "user.health.mobility.limit", "The user can't manage stairs."),
        ("I can't walk far.", "user.health.mobility.limit", "The user can't walk far."),
        ("我爬不了楼梯。", "user.health.mobility.limit", "用户说：“我爬不了楼梯”。"),
        ("I'm hard of hearing.", "user.health.hearing", "The user is hard of hearing."),
        ("I'm partially deaf in my left ear.", "user.health.hearing", "The user is partially deaf in their left ear."),
        ("I wear hearing aids.", "user.health.hearing", "The user wears hearing aids."),
        ("I'm partially sighted.", "user.health.vision", "The user is partially sighted."),
        ("我听力不太好。", "user.health.hearing", "用户说：“我听力不太好”。"),
        ("I was diagnosed with multiple sclerosis in 2019.", "user.health.multiple_sclerosis",
         "The user has multiple sclerosis."),
        ("I have arthritis in my hands.", "user.health.arthritis", "The user has arthritis."),
        ("I have Crohn's disease.", "user.health.crohn_s_disease", "The user has Crohn's disease."),
        ("I suffer from migraines.", "user.health.migraine", "The user has migraines."),
        ("Being epileptic, I never drive.", "user.health.epileptic", "The user is epileptic."),
        ("Bread is off the table, as a coeliac I stick to rice.", "user.health.coeliac", "The user is coeliac."),
        ("The office cake is wasted on me, being diabetic.", "user.health.diabetic", "The user is diabetic."),
        ("I'm type 2 diabetic.", "user.health.type_2_diabetic", "The user is type 2 diabetic."),
        ("The ramp was too steep for my wheelchair.", "user.health.mobility", "The user uses a wheelchair."),
        ("Our household keeps halal.", "user.diet", "The user eats only halal food."),
        ("We're pescatarian, so fish is fine.", "user.diet", "The user is pescatarian."),
    ],
)
def test_a_medicine_an_aid_a_sense_or_a_condition_told_by_how_it_is_said(said: str, key: str, content: str) -> None:
    """Named by the way it is said (how a medicine is taken, the aid one moves with, a condition's form),
    not by a list of names: a medicine or condition the rules never heard of is read all the same."""
    (item,) = [i for i in rule_extract([(2, "user", said)], NOW) if i.key == key]
    assert item.content == content and item.expires_at is None
    assert health(item)


@pytest.mark.parametrize(
    "said",
    [
        "I take walks every morning.", "I take notes daily.", "I take the train every day.", "I'm deaf to your excuses.",
        "I have a cold.", "I have tonsillitis.", "I was diagnosed with flu yesterday.", "I suffer from stress at work.",
        "I have a meeting at noon.", "I need a wheelchair at the airport tomorrow.", "I'm on antibiotics this week.",
        "I can't walk far today, my ankle hurts.", "My husband uses a wheelchair.", "I speak up when something is wrong.",
        "I don't eat much when I'm stressed.", "我今天走不了远路。", "I take Uber every day.",
        "I take Pilates every morning.", "I suffer from my neighbours' noise.", "医生给我开了病假条。",
        "Being asthmatic is no fun, I imagine.", "As a diabetic, he has to plan every meal, I know.",
        "My son being coeliac, I bake gluten-free.", "I ordered from the diabetic-friendly menu, as a treat.",
        "My wheelchair-bound uncle loves the seaside.", "I pushed my dad's wheelchair up the hill.",
        "We're a vegan cafe on the high street.", "We went vegan for a week in January.",
    ],
)
def test_what_is_not_a_lasting_health_fact_of_the_user_is_not_read_as_one(said: str) -> None:
    assert [(i.key, i.content) for i in rule_extract([(1, "user", said)], NOW)
            if i.standing and i.category == "health"] == []


def test_these_days_is_lately_but_this_week_is_for_now() -> None:
    (lately,) = rule_extract([(1, "user", "I use a walker to get around these days.")], NOW)
    assert (lately.key, lately.standing) == ("user.health.mobility", True)
    assert rule_extract([(1, "user", "I use a walker this week, after the operation.")], NOW) == []


# Chinese drops a subject the listener knows: a health fact that opens a sentence naming no one is the
# speaker's, read as if "我" began it.
@pytest.mark.parametrize(
    ("said", "key"),
    [
        ("乳糖不耐受，一喝牛奶就闹肚子。", "user.health.乳糖不耐受"),
        ("对猫毛过敏，一靠近就打喷嚏。", "user.allergy.猫毛"),
        ("有糖尿病，每天都要打胰岛素。", "user.health.糖尿病"),
        ("对花生过敏。", "user.allergy.peanut"),
    ],
)
def test_a_chinese_health_fact_without_its_subject_is_the_speakers(said: str, key: str) -> None:
    (item,) = [i for i in rule_extract([(3, "user", said)], NOW) if i.key == key]
    assert item.about_user and health(item) and item.content.startswith("用户")


@pytest.mark.parametrize(
    "said",
    [
        "对花生过敏的人很多。",  # people at large
        "对花生过敏很常见。",  # a claim about people
        "他对花生过敏。",  # someone else
        "对猫过敏怎么办？",  # a question
        "对猫过敏很麻烦。",  # the fact as a topic the clause goes on to judge
        "住在杭州很舒服。",  # no health fact: the rules read no other kind of fact so
        "不吃早饭对身体不好。",
        "如果对花生过敏就麻烦了。",  # supposed
        "听说有糖尿病的话要少吃糖。",
    ],
)
def test_a_chinese_sentence_without_a_subject_that_is_no_fact_of_the_speakers_is_not_read(said: str) -> None:
    assert rule_extract([(3, "user", said)], NOW) == []
