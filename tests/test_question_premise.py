"""What a question states before it asks is read as a statement; a question itself states nothing."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.memory.extraction.asking import premise
from proxy.memory.extraction.rules import read_turns, rule_extract

NOW = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


@pytest.mark.parametrize(("asked", "key"), [
    ("I'm allergic to nuts, so what snacks can I take on the plane?", "user.allergy.nut"),
    ("I'm allergic to nuts so what snacks can I take on the plane?", "user.allergy.nut"),  # no comma
    ("I'm a strict vegetarian but which of these dishes would you pick?", "user.diet"),
    ("Since I'm vegetarian, what protein sources do you recommend?", "user.diet"),
    ("I use a wheelchair, which museums in Paris are accessible?", "user.health.mobility"),
    ("我对花生过敏，坐飞机能带什么零食？", "user.allergy.peanut"),
])
def test_a_fact_said_as_the_premise_of_a_question_is_read(asked: str, key: str) -> None:
    assert [item.key for item in rule_extract([(0, "user", asked)], NOW)] == [key]


@pytest.mark.parametrize("asked", [
    "Do you think I'm allergic to cats, or is it just dust?",  # asks from its first word
    "So if I'm vegan, what can I eat?",  # a supposition
    "My wife is pregnant, what should we avoid eating?",  # someone else's fact
    "我是不是对花生过敏，怎么检查？",  # asks in its first clause
    "Am I allergic to penicillin?",
    "Is it fine if I'm allergic to nuts and can I still fly?",  # asks from its first word
])
def test_a_question_that_asks_from_its_start_or_of_someone_else_states_nothing_of_the_user(asked: str) -> None:
    assert rule_extract([(0, "user", asked)], NOW) == []


def test_the_premise_goes_first_and_the_question_stays_for_the_other_readers() -> None:
    asked = "My flat gets very little light, which plants would survive?"
    assert read_turns([(3, "user", asked)], NOW) == ([], [(3, "My flat gets very little light."), (3, asked)])


def test_greetings_and_too_little_before_the_question_are_no_premise() -> None:
    assert premise("Hey, what's a good recipe?") is None
    assert premise("Quick question, how do I fix this?") is None
    assert premise("好的，有什么推荐吗？") is None
    assert premise("I live in Leeds.") is None  # no question
    assert premise("Cats and dogs can live together?") is None  # no question word after the "and"


WORDS = st.sampled_from(["I", "live", "in", "Leeds", "so", "what", ",", "do", "you", "我", "对", "花生", "过敏",
                         "，", "什么", "吗", "？", "?", "allergic", "how"])


@given(st.lists(WORDS, max_size=14).map(" ".join))
def test_a_premise_is_the_start_of_a_question_and_ends_as_a_statement(text: str) -> None:
    stated = premise(text)
    if stated is not None:
        assert text.strip().endswith(("?", "？", "吗"))
        assert stated.endswith((".", "。")) and not stated.endswith(("?.", "？。"))
        assert text.strip().replace("，", ",").startswith(stated[:-1].replace("，", ",").rstrip())
