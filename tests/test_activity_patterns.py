"""Activities given up or taken up, and what happened to the body: the rules, EN and ZH, and the supersede they drive."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from proxy.memory.extraction.activities import gerund
from proxy.memory.extraction.reconcile import close_pairs, fold_batch
from proxy.memory.extraction.rules import rule_extract
from proxy.memory.lifecycle import ExistingItem, decide, slot_keys, slot_members
from proxy.memory.memory_schema import MemoryItem

NOW = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
DEDUP = 0.92


def said(*texts: str) -> list[tuple[str, str]]:
    return [(i.key, i.content) for i in rule_extract([(n, "user", t) for n, t in enumerate(texts)], NOW)]


@pytest.mark.parametrize(
    ("verb", "thing", "activity"),
    [("run", "", "running"), ("swim", "", "swimming"), ("hike", "", "hiking"), ("ski", "", "skiing"),
     ("work out", "", "working out"), ("play", "tennis", "playing tennis"), ("do", "yoga", "yoga"),
     ("go", "climbing", "climbing"), ("cycle", "", "cycling"), ("box", "", "boxing")],
)
def test_a_verb_names_its_activity(verb: str, thing: str, activity: str) -> None:
    assert gerund(verb, thing) == activity


def test_giving_up_an_activity_for_a_reason_and_taking_up_another_are_three_facts() -> None:
    assert said("I don't run anymore since my knee surgery, I swim now.") == [
        ("user.preference.running", "The user has stopped running, since their knee surgery."),
        ("user.preference.swimming", "The user has taken up swimming."),
        ("user.health.knee", "The user had knee surgery."),
    ]
    assert said("膝盖手术以后我不跑步了，现在改游泳了。") == [
        ("user.preference.running", "用户因膝盖手术，不再跑步了。"),
        ("user.preference.swimming", "用户现在改为游泳。"),
        ("user.health.knee", "用户的膝盖做过手术。"),
    ]


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("I no longer play tennis.", "user.preference.playing_tennis"),
        ("I stopped running marathons last year.", "user.preference.running_marathon"),
        ("I've given up cycling.", "user.preference.cycling"),
        ("I can't hike any more.", "user.preference.hiking"),
        ("我已经不再打网球了。", "user.preference.playing_tennis"),
        ("我放弃了滑雪。", "user.preference.skiing"),
        ("我再也不爬山了", "user.preference.hiking"),
    ],
)
def test_an_activity_given_up_holds_the_slot_of_its_liking(text: str, key: str) -> None:
    ((found, content),) = said(text)
    assert found == key and any(w in content for w in ("stopped", "given up", "不再"))


def test_the_same_activity_liked_in_either_language_is_one_slot() -> None:
    assert [k for k, _ in said("I love playing tennis.", "我很喜欢打网球。", "我很喜欢跑步。")] == [
        "user.preference.playing_tennis", "user.preference.playing_tennis", "user.preference.running"]


@pytest.mark.parametrize(
    ("text", "key", "content"),
    [
        ("I hurt my back lifting boxes.", "user.health.back", "The user hurt their back."),
        ("I have an ankle injury from football.", "user.health.ankle", "The user has an ankle injury."),
        ("我的腰受伤了。", "user.health.back", "用户的腰受过伤。"),
        ("我做了膝盖手术。", "user.health.knee", "用户的膝盖做过手术。"),
    ],
)
def test_an_injury_or_operation_is_a_health_constraint(text: str, key: str, content: str) -> None:
    ((found, what),) = [(k, c) for k, c in said(text) if k.startswith("user.health")]
    assert (found, what) == (key, content)
    (item,) = [i for i in rule_extract([(1, "user", text)], NOW) if i.key == key]
    assert item.category == "health"


@pytest.mark.parametrize(("text", "stands"), [
    ("I sprained my ankle playing football.", False), ("I broke my wrist.", False), ("我的腰扭伤了。", False),
    ("I had knee surgery.", True), ("I have an ankle injury from football.", True), ("我做了膝盖手术。", True),
])
def test_getting_hurt_is_of_the_moment_an_injury_or_operation_one_has_stands(text: str, stands: bool) -> None:
    (item,) = [i for i in rule_extract([(0, "user", text)], NOW) if i.key.startswith("user.health")]
    assert item.standing is stands


@pytest.mark.parametrize(
    "text",
    ["I don't know anymore.", "I started working at Google.", "Do you still run?", "I can't run today, it's raining.",
     "My brother doesn't run anymore.", "你还跑步吗？", "I don't care anymore about the game."],
)
def test_no_activity_fact_from_a_remark_a_question_or_someone_else(text: str) -> None:
    assert said(text) == []


def vec(*xs: float) -> np.ndarray:
    v = np.array(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


LIKED = ExistingItem("7", "user.preference.running_marathon", "The user loves running marathons.", vec(1, 0, 0))
ZH_LIKED = ExistingItem("8", "user.preference.running_marathon", "用户很喜欢跑马拉松。", vec(1, 0, 0))


@pytest.mark.parametrize(
    ("new", "old"),
    [
        (MemoryItem(type="preference", content="The user has stopped running, since their knee surgery.", key="user.preference.running"),
         LIKED),
        (MemoryItem(type="preference", content="用户因膝盖手术，不再跑步了。", key="user.preference.running"), ZH_LIKED),
    ],
)
def test_an_ended_activity_supersedes_every_narrower_taste_of_it(new: MemoryItem, old: ExistingItem) -> None:
    decision = decide(new, vec(0, 1, 0), [old], DEDUP)
    assert (decision.action, decision.target_ids) == ("supersede", (old.id,))
    # The model is not asked about a pair the rules already settle.
    assert close_pairs(fold_batch([new], [vec(1, 0, 0)], DEDUP), [old]) == []


def test_a_liking_does_not_end_narrower_tastes_nor_reach_other_slots() -> None:
    liking = MemoryItem(type="preference", content="The user loves running.", key="user.preference.running")
    assert slot_members(liking, [LIKED]) == []
    ended = MemoryItem(type="preference", content="The user has stopped running.", key="user.preference.running")
    rower = ExistingItem("9", "user.preference.runningboard", "The user likes runningboards.", vec(1, 0, 0))
    assert slot_members(ended, [LIKED, rower]) == [LIKED]
    ring = MemoryItem(type="entity", content="用户买了一个戒指。", key="user.preference.running")  # 戒指 is a ring, not "gave up"
    assert slot_members(ring, [LIKED]) == []
    quit_zh = MemoryItem(type="preference", content="用户戒掉了跑步。", key="user.preference.running")
    assert slot_members(quit_zh, [LIKED]) == [LIKED]
    two_segments = MemoryItem(type="entity", content="The user no longer has a name.", key="user.name")
    assert slot_members(two_segments, [ExistingItem("1", "user.name_old", "x", vec(1, 0, 0))]) == []


def test_a_slot_stored_under_the_old_plural_cut_is_the_same_slot() -> None:
    assert "user.preference.playing_tenni" in slot_keys("user.preference.playing_tennis")
