"""The rule extractor's budgets and contact channels, English and Chinese: standing preferences, one slot each."""

from __future__ import annotations

import datetime as dt

import pytest

from proxy.memory.extraction.rules import rule_extract

NOW = dt.datetime(2026, 12, 2, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("said", "key", "content"),
    [
        ("My budget for the trip is 2,000 euros.", "user.budget.trip", "The user's budget for the trip is 2,000 euros."),
        ("I can spend up to $500 on a phone.", "user.budget.phone", "The user's budget for the phone is $500."),
        ("My budget is around fifteen hundred dollars.", "user.budget", "The user's budget is fifteen hundred dollars."),
        ("I don't want to spend more than 300 pounds.", "user.budget", "The user's budget is 300 pounds."),
        ("我的预算是五千块。", "user.budget", "用户的预算是五千块。"),
        ("Please only contact me by email.", "user.contact.channel", "The user wants to be contacted by email."),
        ("Email is the best way to reach me.", "user.contact.channel", "The user wants to be contacted by email."),
        ("Don't call me.", "user.contact.not.phone", "The user does not want phone calls."),
        ("请只用邮件联系我。", "user.contact.channel", "用户希望通过邮件联系。"),
        ("别给我打电话。", "user.contact.not.phone", "用户不希望接到电话。"),
    ],
)
def test_a_budget_or_a_channel_is_a_standing_preference(said: str, key: str, content: str) -> None:
    (item,) = [i for i in rule_extract([(3, "user", said)], NOW) if i.key == key]
    assert (item.content, item.category, item.standing, item.expires_at) == (content, "preference", True, None)


@pytest.mark.parametrize(
    "said",
    ["My budget for dinner tonight is $50.", "Don't call me today, I'm in meetings.", "Please email me the report.",
     "Can you call me back?", "Our company's budget is $5k.", "The budget for the project is 2 million dollars.",
     "Don't call me Robert."],
)
def test_a_budget_for_now_a_request_or_someone_elses_budget_is_no_standing_preference(said: str) -> None:
    assert [(i.key, i.content) for i in rule_extract([(1, "user", said)], NOW)
            if i.standing and (i.key.startswith(("user.budget", "user.contact")))] == []


def test_a_new_budget_takes_the_slot_of_the_old() -> None:
    first, second = rule_extract([(1, "user", "My budget is 800 euros."), (5, "user", "My budget is 1,200 euros.")], NOW)
    assert first.key == second.key == "user.budget" and "1,200" in second.content


@pytest.mark.parametrize("said", [
    "每天三杯美式续命，不喝下午就废了。",  # "without it the afternoon is gone": a condition, not a dislike
    "我不吃早饭会头晕。", "不喝咖啡的话根本醒不过来。", "我不吃饭才怪。",
])
def test_not_eating_or_drinking_as_a_condition_is_no_dislike(said: str) -> None:
    assert [i.content for i in rule_extract([(3, "user", said)], NOW) if i.key.startswith("user.preference.")] == []


@pytest.mark.parametrize(("said", "content"), [("我不喝咖啡。", "用户不喝咖啡。"), ("我不吃香菜了。", "用户不吃香菜。")])
def test_a_chinese_dislike_is_still_read(said: str, content: str) -> None:
    assert [i.content for i in rule_extract([(3, "user", said)], NOW) if i.key.startswith("user.preference.")] == [content]
