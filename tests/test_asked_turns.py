"""Questions are not memories: which turns only ask, and how ranking weighs them."""

from __future__ import annotations

import pytest

from proxy.memory.recall.asked_turns import QUESTION_WEIGHT, asks_only, question_weight
from proxy.memory.recall.ranking import NEARBY_WEIGHT, Candidate, rank
from proxy.store.records import Fragment


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


def test_only_a_users_asking_turn_is_weighed_down() -> None:
    assert question_weight("user", "Hey Mel! How was the concert?") == QUESTION_WEIGHT < 1
    assert question_weight("assistant", "How was the concert?") == 1.0
    assert question_weight("user", "The concert was great!") == 1.0


def test_ranking_puts_an_old_question_below_the_exchange_that_answers_it() -> None:
    def frag(fid: int, role: str, text: str, position: int, session: str = "s") -> Fragment:
        return Fragment(id=fid, session=session, hash=f"h{fid}", role=role, text=text, position=position, tokens=5,
                        created=0.0)

    asked = Candidate(0, 1.0, frag(1, "user", "When did Caroline go to the support group?", 10), None)
    other = Candidate(1, 0.6, frag(2, "user", "I went to the support group on 7 May.", 3, "earlier"), None)
    reply = Candidate(2, 0.2, frag(3, "assistant", "On 7 May 2023.", 11), None)
    ranked = [(c.fragment.id if c.fragment else 0, round(s, 3)) for c, s, _ in rank([asked, other, reply], [])]
    # The question keeps 0.3 of its score; its reply inherits 0.3 of that, as any neighbour does
    # (and each inherits NEARBY_WEIGHT of the other, the best other turn near it in the session).
    assert ranked == [(2, 0.6), (1, round(0.3 + 0.3 * 0.2 + NEARBY_WEIGHT * 0.2, 3)),
                      (3, round(0.2 + 0.3 * 0.3 + NEARBY_WEIGHT * 0.3, 3))]
