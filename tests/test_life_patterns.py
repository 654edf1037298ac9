"""The rule extractor's identity and taste statements said in more ways: homes, jobs, names, languages, switches."""

from __future__ import annotations

import datetime as dt

import pytest

from proxy.memory.extraction.rules import rule_extract
from proxy.memory.memory_schema import MemoryItem

NOW = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)


def kind(item: MemoryItem) -> str | None:
    """The category of a standing fact, None for one that does not stand."""
    return item.category if item.standing else None


@pytest.mark.parametrize(
    ("said", "key", "content", "expected_kind"),
    [
        ("We just relocated to Austin, Texas.", "user.location.home", "The user lives in Austin, Texas.", "identity"),
        ("I now live in Seattle.", "user.location.home", "The user lives in Seattle.", "identity"),
        ("My new address is 12 Baker Street, London.", "user.location.home",
         "The user's home address is 12 Baker Street, London.", "identity"),
        ("我现在住在北京。", "user.location.home", "用户住在北京。", "identity"),
        ("我们住在成都。", "user.location.home", "用户住在成都。", "identity"),
        ("告诉你一下，我们周末搬到南京了。", "user.location.home", "用户住在南京。", "identity"),
        ("我的新地址是上海市长宁区100号。", "user.location.home", "用户的地址是上海市长宁区100号。", "identity"),
        ("I work as a software engineer at a bank.", "user.occupation", "The user is a software engineer.", "identity"),
        ("I'm a night-shift nurse.", "user.occupation", "The user is a nurse.", "identity"),
        ("我是一名护士。", "user.occupation", "用户是护士。", "identity"),
        ("I retired from teaching last June.", "user.occupation", "The user is retired.", "identity"),
        ("I'm retired now, so my days are my own.", "user.occupation", "The user is retired.", "identity"),
        ("I've been retired for six years.", "user.occupation", "The user is retired.", "identity"),
        ("我去年退休了。", "user.occupation", "用户已退休。", "identity"),
        ("Please always answer in French.", "user.language.reply", "The user wants replies in French.", "identity"),
        ("I speak Spanish natively.", "user.language", "The user's native language is Spanish.", "identity"),
        ("My daughter Mia is 6.", "user.daughter.name", "The user's daughter is called Mia.", "relationship"),
        ("Our dog Rex loves long walks.", "user.dog.name", "The user's dog is called Rex.", "relationship"),
        ("My cat Luna sleeps on my keyboard all day.", "user.cat.name", "The user's cat is called Luna.",
         "relationship"),
        ("My son Theo started school in September.", "user.son.name", "The user's son is called Theo.",
         "relationship"),
        ("My daughter Ava's turning 7 and wants a pony party.", "user.daughter.name",
         "The user's daughter is called Ava.", "relationship"),
        ("Our son Omar (11) plays the trumpet.", "user.son.name", "The user's son is called Omar.", "relationship"),
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
        "My dog Sunday walks are the best.",  # "Sunday" then a noun: no name said
        # a stay of a span said, not a home
        "I moved to Leeds for the summer.", "We relocated to Austin for three months with work.",
        "I'm based in Lisbon for a few weeks.", "Moved to Leeds for the winter term.",
    ],
)
def test_not_a_standing_fact(said: str) -> None:
    assert [(i.key, i.content) for i in rule_extract([(1, "user", said)], NOW) if kind(i) is not None] == []


def test_a_switch_ends_the_old_taste_and_takes_up_the_new() -> None:
    old, new = rule_extract([(3, "user", "I've switched from coffee to tea.")], NOW)
    assert (old.key, new.key) == ("user.preference.coffee", "user.preference.tea")
    assert "switched from coffee to tea" in old.content and "prefers tea" in new.content


def test_a_move_said_any_way_takes_the_home_slot() -> None:
    said = ["I live in Boston.", "I just relocated to Austin, Texas.", "My new address is 5 Elm Road, Austin."]
    items = rule_extract([(i, "user", s) for i, s in enumerate(said)], NOW)
    assert [i.key for i in items] == ["user.location.home"] * 3
    assert [i.turns for i in items] == [(0,), (1,), (2,)]


@pytest.mark.parametrize(
    "said",
    [
        "Our company moved to the 5th floor.", "We moved to Tower B last week.", "We moved to the Austin office.",
        "我们公司搬到了五楼。", "我们搬到了新的办公室。", "I'm based in the Berlin office.",
        "Our office address is 100 Main Street, Boston.", "My company's new address is 9 Dock Road, Leeds.",
        "My friend is allergic to peanuts.", "My boss can't eat gluten.", "Our office can't have nuts.",
        "我朋友对花生过敏。", "我同事不能吃辣。", "My colleague is vegan.",
    ],
)
def test_what_is_said_of_the_office_the_company_or_friends_is_not_the_users(said: str) -> None:
    assert [(i.key, i.content) for i in rule_extract([(1, "user", said)], NOW)] == []


def test_an_office_move_said_later_leaves_the_home_alone() -> None:
    items = rule_extract([(1, "user", "I live in Lyon."), (3, "user", "Our company moved to the 5th floor."),
                          (5, "user", "我们公司搬到了五楼。")], NOW)
    assert [(i.key, i.content) for i in items] == [("user.location.home", "The user lives in Lyon.")]


@pytest.mark.parametrize(
    ("said", "about", "category"),
    [
        ("My dog can't eat chicken.", "the user's dog", "relationship"),
        ("Our son Leo is allergic to eggs.", "the user's son Leo", "relationship"),
        ("我女儿对牛奶过敏。", "用户的女儿", "relationship"),
        ("I'm allergic to shellfish.", "user", "health"),
    ],
)
def test_a_fact_of_someone_in_the_users_care_says_whom_it_is_about(said: str, about: str, category: str) -> None:
    (item,) = [i for i in rule_extract([(1, "user", said)], NOW) if not i.key.endswith(".name")]
    assert (item.about, item.category, item.standing) == (about, category, True)


@pytest.mark.parametrize(
    ("said", "key", "content"),
    [
        ("I speak German and a little French.", "user.language.spoken.german", "The user speaks German."),
        ("I speak German and a little French.", "user.language.spoken.french", "The user speaks French."),
        ("我会说粤语。", "user.language.spoken.粤语", "用户会说粤语。"),
        ("我会说粤语和普通话。", "user.language.spoken.普通话", "用户会说普通话。"),
        ("I call Leeds home.", "user.location.home", "The user lives in Leeds."),
        ("My pronouns are they/them.", "user.pronouns", "The user's pronouns are they/them."),
        ("I use she/her pronouns.", "user.pronouns", "The user's pronouns are she/her."),
        ("My name's Priya.", "user.name", "The user's name is Priya."),
        ("Home for me is Dublin.", "user.location.home", "The user lives in Dublin."),
        ("The office is in Chicago but I live in Evanston.", "user.location.home", "The user lives in Evanston."),
        ("I work nights at the hospital.", "user.work.schedule", "The user works nights."),
        ("我一直上夜班。", "user.work.schedule", "用户一直上夜班。"),
    ],
)
def test_languages_pronouns_a_home_and_a_way_of_working(said: str, key: str, content: str) -> None:
    (item,) = [i for i in rule_extract([(4, "user", said)], NOW) if i.key == key]
    assert (item.content, item.expires_at) == (content, None) and kind(item) == "identity"


@pytest.mark.parametrize(
    "said",
    ["I speak to my manager every day.", "I work nights this week.", "My company is based in Berlin.",
     "Our office moved to the fifth floor.", "我们公司搬到了五楼。", "I call Sarah every day.", "我会说实话。"],
)
def test_a_way_of_speaking_a_week_of_nights_or_the_office_is_no_identity_fact(said: str) -> None:
    assert [(i.key, i.content) for i in rule_extract([(1, "user", said)], NOW) if kind(i) == "identity"] == []


# Chat drops the subject a listener knows: a sentence that opens on a verb's -ing or past form, a state
# ("Allergic to…") or "been" (after a word such as "Also" or "Big news —") is the speaker's, read as if
# "I'm", "I" or "I've" began it.
@pytest.mark.parametrize(
    ("said", "key", "content"),
    [
        ("Starting as a junior developer at a fintech on Monday, bricking it a bit.", "user.occupation",
         "The user is a developer."),
        ("Working as a nurse on the kids' ward these days.", "user.occupation", "The user is a nurse."),
        ("Moved to Bristol in the spring.", "user.location.home", "The user lives in Bristol."),
        ("Big news — moved to Leeds last month!", "user.location.home", "The user lives in Leeds."),
        ("Quit smoking in March, finally!", "user.preference.smoking", "The user has quit smoking."),
        ("Officially retired as of Friday! 32 years in the classroom.", "user.occupation", "The user is retired."),
        ("I've started as a paramedic.", "user.occupation", "The user is a paramedic."),
        ("I'm starting as a teacher in September.", "user.occupation", "The user is a teacher."),
        # a state ("I'm"), and "been" ("I've")
        ("Allergic to sesame, so careful with takeaways.", "user.allergy.sesame", "The user is allergic to sesame."),
        ("Btw lactose intolerant, so oat milk please.", "user.health.lactose_intolerant",
         "The user is lactose intolerant."),
        ("Based in Leeds, working remotely.", "user.location.home", "The user lives in Leeds."),
        ("Been vegan since uni.", "user.diet", "The user is vegan."),
    ],
)
def test_a_fact_said_without_its_subject_is_the_speakers(said: str, key: str, content: str) -> None:
    (item,) = [i for i in rule_extract([(3, "user", said)], NOW) if i.key == key]
    assert item.content == content and item.standing


@pytest.mark.parametrize(
    "said",
    [
        "Living in London is expensive.",  # the act as a subject the clause goes on to judge
        "Working as a nurse must be exhausting.",
        "Moving to Leeds would be a big step.",
        "Moved to Bristol?",  # a question
        "Take the train to Leeds.",  # an imperative
        "She moved to Bristol in the spring.",  # someone else
        "I worked as a nurse for ten years before this.",  # a past job
        "I retired the old laptop.", "I'm not retired yet.", "My dad retired last year.",  # not the user retiring
        "When I retire I'll move to Spain.", "I retired from playing rugby at 30.", "我爸去年退休了。",
    ],
)
def test_a_sentence_that_drops_no_subject_of_the_speakers_reads_nothing(said: str) -> None:
    assert [i for i in rule_extract([(3, "user", said)], NOW) if i.key in ("user.occupation", "user.location.home")] == []


@pytest.mark.parametrize("said", ["Based in Leeds is the company I work for.", "Married life is hard work.",
                                  "Vegan food is great.", "Allergic reactions can be scary."])
def test_a_state_the_sentence_goes_on_to_judge_is_no_fact_of_the_speakers(said: str) -> None:
    assert rule_extract([(3, "user", said)], NOW) == []
