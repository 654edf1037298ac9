"""The query's words search for their other -ing / -ed forms too: "camped" meets "camping"."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from proxy.memory.recall.query import inflected
from proxy.memory.search.bm25 import tokenize


def test_a_verb_form_finds_its_other_forms() -> None:
    assert {"camp", "camping"} <= set(inflected(["camped"]))
    assert {"paint", "painted"} <= set(inflected(["painting"]))
    assert {"researching", "researched"} <= set(inflected(["research"]))
    assert {"write", "writing"} <= set(inflected(["wrote", "writes", "written", "write"]))
    assert {"run", "running"} <= set(inflected(["running"]))
    assert {"marry", "married"} <= set(inflected(["marrying"]))
    assert {"move", "moved", "moving"} <= set(inflected(["moved"]))


def test_short_words_and_chinese_are_left_as_they_are() -> None:
    assert inflected(["need", "ring", "bed"]) == ["need", "ring", "bed"]
    assert inflected(tokenize("我的猫对什么过敏")) == tokenize("我的猫对什么过敏")
    assert inflected(["2023", "covid19"]) == ["2023", "covid19"]


words = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=12)


@given(st.lists(words, max_size=8))
def test_the_question_terms_come_first_each_once_then_forms_sharing_their_stem(terms: list[str]) -> None:
    out = inflected(terms)
    unique = list(dict.fromkeys(terms))
    assert out[: len(unique)] == unique
    assert len(out) == len(set(out))
    for form in out[len(unique):]:
        # Every added form keeps at least the first three letters of a question term.
        assert any(len(t) >= 5 and form[:3] == t[:3] for t in unique)
