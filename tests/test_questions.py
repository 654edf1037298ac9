"""Questions are not memories: which turns only ask, and how ranking weighs them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.memory.questions import QUESTION_WEIGHT, asks_only, weigh_questions


@pytest.mark.parametrize(
    ("text", "asks"),
    [
        ("Hey Mel! How was the concert?", True),
        ("When did Caroline go to the LGBTQ support group?", True),
        ("Can you suggest a dinner recipe for tonight?", True),
        ("你好！你去过杭州吗？", True),
        ("好的！你吃饭了吗", True),
        ("The concert was great! Have you been?", False),  # it tells something too
        ("我住在杭州。你呢？", False),
        ("今晚晚饭做什么好？给我推荐个菜谱。", False),
        ("I love tea", False),
        ("Thanks!", False),  # nothing asked
        ("Remind me to call the dentist.", False),
        ("Why does this fail?\n```python\nx = 1\n```", False),
        ("", False),
    ],
)
def test_a_turn_asks_only_when_every_sentence_asks_or_is_an_interjection(text: str, asks: bool) -> None:
    assert asks_only(text) is asks


def test_a_question_passes_its_score_to_the_reply() -> None:
    # 0: a question, 1: its reply, 2: an unrelated statement, 3: a question without a reply.
    out = weigh_questions([1.0, 0.2, 0.5, 0.8], [True, False, False, True], [1, None, None, None])
    assert out == pytest.approx([QUESTION_WEIGHT, 1 - QUESTION_WEIGHT, 0.5, 0.8 * QUESTION_WEIGHT])
    # A reply that is itself a question is weighed as one, and a strong reply keeps its own score.
    assert weigh_questions([1.0, 0.9], [True, False], [1, None]) == pytest.approx([QUESTION_WEIGHT, 0.9])
    assert weigh_questions([1.0, 0.4], [True, True], [1, None]) == pytest.approx([0.3, 0.12])


@given(st.lists(st.tuples(st.floats(0, 2), st.booleans()), max_size=20), st.data())
def test_weighing_never_raises_a_question_nor_lowers_a_statement(rows: list[tuple[float, bool]], data: st.DataObject) -> None:
    base = [b for b, _ in rows]
    asks = [a for _, a in rows]
    replies = [data.draw(st.none() | st.integers(0, len(rows) - 1)) for _ in rows]
    out = weigh_questions(base, asks, replies)
    for b, a, o in zip(base, asks, out, strict=True):
        assert (o <= b) if a else (o >= b)
