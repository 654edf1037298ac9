"""Who a question is about: a participant's name points to the side that speaks as them, and ranking prefers it."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.memory.recall.asked_turns import asks_only
from proxy.memory.recall.query import names_in
from proxy.memory.recall.ranking import NEARBY_WEIGHT, Candidate, rank
from proxy.memory.recall.speakers import (
    MIN_MENTIONS,
    OTHER_SPEAKER_WEIGHT,
    SKEW,
    Mentions,
    addressed,
    named_role,
    speaker_named,
    speaker_weight,
)
from proxy.memory.search.scope_index import ScopeIndex
from proxy.store.records import Fragment

NAMES = {"caroline", "melanie"}


def common(term: str) -> bool:
    return term in NAMES


def test_the_names_of_a_question_are_its_common_capitalised_words_the_first_too() -> None:
    assert names_in("What did Caroline paint?", common) == ["caroline"]
    assert names_in("Caroline said what to Melanie's kids?", common) == ["caroline", "melanie"]
    assert names_in("When did Caroline and caroline meet Biscuit?", common) == ["caroline"]
    assert names_in("What did I paint?", common) == []
    assert names_in("卡罗琳画了什么？", common) == []


def test_a_name_said_mostly_by_one_side_belongs_to_the_other() -> None:
    assert named_role({"assistant": 128, "user": 1}) == "user"  # the assistant addresses the user by name
    assert named_role({"user": 57}) == "assistant"
    assert named_role({"user": 40, "assistant": 30}) is None  # a friend both talk about
    assert named_role({"assistant": MIN_MENTIONS - 1}) is None  # too few to tell


@given(st.integers(0, 500), st.integers(0, 500))
def test_a_name_belongs_to_at_most_one_side_and_only_with_a_clear_skew(by_user: int, by_assistant: int) -> None:
    role = named_role({"user": by_user, "assistant": by_assistant})
    if role == "user":
        assert by_assistant >= SKEW * by_user and by_assistant >= MIN_MENTIONS
    elif role == "assistant":
        assert by_user >= SKEW * by_assistant and by_user >= MIN_MENTIONS
    # Swapping the sides swaps the answer.
    swapped = named_role({"user": by_assistant, "assistant": by_user})
    assert swapped == {"user": "assistant", "assistant": "user", None: None}[role]


def test_a_question_naming_both_sides_or_neither_prefers_no_speaker() -> None:
    user, assistant = {"assistant": 100}, {"user": 100}
    assert speaker_named([user]) == "user"
    assert speaker_named([user, user]) == "user"
    assert speaker_named([user, assistant]) is None
    assert speaker_named([]) is None
    assert speaker_named([{"user": 5, "assistant": 5}, assistant]) == "assistant"


@given(st.sampled_from(["user", "assistant"]), st.sampled_from(["user", "assistant", None]))
def test_only_the_other_sides_turns_are_weighed_down(role: str, speaker: str | None) -> None:
    weight = speaker_weight(role, speaker)  # type: ignore[arg-type]
    assert weight == (OTHER_SPEAKER_WEIGHT if speaker is not None and role != speaker else 1.0)


def test_the_turns_addressing_a_name_are_counted_by_role_without_the_users_questions() -> None:
    scope = ScopeIndex(4)
    turns = [
        (1, "assistant", "Thanks Caroline"),
        (2, "assistant", "Wow Caroline, that is new."),
        (3, "user", "Caroline here"),  # says the name, addresses nobody
        (4, "user", "What did Caroline paint?"),  # a recorded question: whom it asks about
        (5, "assistant", "How are you, Caroline?"),  # addressing her
        (6, "user", "Caroline, look at this!"),
    ]
    for fid, role, text in turns:
        scope.add(frag(fid, role, text, fid), text.lower().strip("?!.").replace(",", "").split(), np.zeros(4, dtype=np.float32))
    assert scope.mentions.of("caroline") == {"assistant": 3, "user": 1}
    assert scope.mentions.of("nobody") == {"assistant": 0, "user": 0}
    assert Mentions().of("caroline") == {}


def test_a_name_only_talked_about_belongs_to_no_side() -> None:
    """A user who tells of a sister in many turns does not make her the assistant's name."""
    mentions = Mentions()
    for i in range(30):
        told = f"My sister Anna and I went to the lake on day {i}. Anna loved it."
        mentions.add(frag(i, "user", told, i), ["sister", "anna", "lake", "day", "loved"])
        mentions.add(frag(100 + i, "assistant", "That sounds lovely, Mel!", i), ["sounds", "lovely", "mel"])
    assert named_role(mentions.of("anna")) is None
    assert named_role(mentions.of("mel")) == "user"  # the assistant addresses the user as Mel


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("Hey Mel! Good to see you.", {"mel"}),
        ("Thanks, Caroline. That helps.", {"caroline"}),
        ("That's great, Jon!", {"jon"}),
        ("Gina, look at this painting!", {"gina"}),
        ("I met Anna at the park yesterday.", set()),
        ("My friend Tom, who lives in Paris, called.", set()),
        ("我昨天见了安娜。", set()),
    ],
)
def test_a_name_is_addressed_after_a_greeting_or_as_its_own_clause(text: str, names: set[str]) -> None:
    assert addressed(text) == names


@given(
    st.lists(
        st.tuples(st.sampled_from(["user", "assistant"]), st.text(max_size=40), st.booleans()),
        max_size=30,
    )
)
def test_mentions_count_the_turns_addressing_a_name_but_the_users_questions(
    turns: list[tuple[str, str, bool]],
) -> None:
    mentions = Mentions()
    texts = []
    for i, (role, text, addresses) in enumerate(turns):
        said = f"{text}\nThanks, Name!" if addresses else f"{text}\nI saw Name today"
        texts.append((role, said, addresses))
        mentions.add(frag(i, role, said, i), ["name"])
    expected = Counter(
        role for role, said, addresses in texts if addresses and not (role == "user" and asks_only(said))
    )
    assert {r: n for r, n in mentions.of("name").items() if n} == dict(expected)


def frag(fid: int, role: str, text: str, position: int) -> Fragment:
    return Fragment(id=fid, session="s", hash=f"h{fid}", role=role, text=text, position=position, tokens=5, created=0.0)


def test_a_question_about_the_user_ranks_the_users_own_turn_above_the_assistants_remark() -> None:
    remark = Candidate(0, 1.0, frag(1, "assistant", "Wow Caroline, that painting is stunning!", 3), None)
    told = Candidate(1, 0.6, frag(2, "user", "I painted a sunset last week.", 10), None)
    plain = [c.fragment.id for c, _, _ in rank([remark, told], []) if c.fragment]
    about_user = [(c.fragment.id, round(s, 3)) for c, s, _ in rank([remark, told], [], speaker="user") if c.fragment]
    assert plain == [1, 2]
    # Seven turns apart in one session: each also inherits NEARBY_WEIGHT of the other.
    assert about_user == [(2, round(0.6 + NEARBY_WEIGHT * OTHER_SPEAKER_WEIGHT, 3)),
                          (1, round(OTHER_SPEAKER_WEIGHT + NEARBY_WEIGHT * 0.6, 3))]
