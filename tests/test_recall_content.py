"""What a recalled turn adds: turns of common words only, and near-repeats, are not injected."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from proxy.memory.recall.content import NEAR_DUPLICATE, informative, near_duplicate, terms_of
from proxy.memory.recall.packing import select
from proxy.tokens import TokenCounter

from .test_retrieval_units import frag, hit

COMMON = frozenset({"great", "thank", "caroline", "wow", "sound"})


def is_common(term: str) -> bool:
    return term in COMMON


def test_a_turn_of_common_words_only_says_nothing_one_specific_word_is_enough() -> None:
    assert not informative(terms_of("It was great!"), is_common)
    assert not informative(terms_of("Thanks, Caroline!"), is_common)
    assert not informative(terms_of("You too!"), is_common)  # stop words only: no term at all
    assert informative(terms_of("Great, I adopted a cat!"), is_common)
    assert informative(terms_of("Rome"), is_common)
    assert informative(terms_of("我对花生过敏"), is_common)  # Chinese is segmented into its terms


def test_with_no_history_nothing_is_common_so_every_turn_with_a_term_counts() -> None:
    assert informative(terms_of("Sounds great!"), lambda t: False)


def test_near_duplicates_overlap_by_the_threshold() -> None:
    said = terms_of("I adopted a cat named Miso last week")
    assert near_duplicate(terms_of("i adopted a cat named miso last week!"), [said])
    assert not near_duplicate(terms_of("I adopted a dog named Rex"), [said])
    assert not near_duplicate(frozenset(), [said])
    assert not near_duplicate(said, [])


words = st.frozensets(st.sampled_from(["cat", "dog", "miso", "rex", "vet", "park", "walk", "rome"]), max_size=8)


@given(words, words)
def test_near_duplicate_is_symmetric_and_is_the_jaccard_overlap(a: frozenset[str], b: frozenset[str]) -> None:
    assert near_duplicate(a, [b]) == near_duplicate(b, [a])
    jaccard = len(a & b) / len(a | b) if a | b else 0.0
    assert near_duplicate(a, [b]) == (bool(a & b) and jaccard >= NEAR_DUPLICATE - 1e-12)


@given(words, st.lists(words, max_size=5))
def test_a_set_is_a_near_duplicate_of_a_list_when_of_one_of_its_sets(a: frozenset[str], shown: list) -> None:
    assert near_duplicate(a, shown) == any(near_duplicate(a, [s]) for s in shown)
    if a:
        assert near_duplicate(a, [*shown, a])  # itself


@given(st.lists(st.sampled_from(["great", "thank", "wow", "cat", "miso"]), max_size=6))
def test_informative_is_having_a_term_that_is_not_common(ws: list[str]) -> None:
    assert informative(frozenset(ws), is_common) == any(w not in COMMON for w in ws)


def test_select_leaves_out_filler_and_repeats_and_spends_the_room_on_content() -> None:
    counter = TokenCounter(None)
    fact = hit(frag(1, 4, "I adopted a cat named Miso"), 0.9)
    filler = hit(frag(2, 5, "Wow, sounds great!", role="assistant"), 0.8)  # a neighbour that says nothing
    repeat = hit(frag(100, 1, "I adopted a cat named Miso!", session="s2"), 0.7)
    other = hit(frag(200, 9, "The vet says Miso is fine", session="s3"), 0.6)  # far on in the history
    cards = select([fact, filler, repeat, other], counter, top_k=8, budget=800, is_common=is_common)
    assert [c.id for c in cards] == ["f1", "f200"]  # the best match first
    assert "sounds great" not in " ".join(c.text for c in cards)
    # With no history to say which words are common, the filler is kept; the repeat never is.
    assert [c.id for c in select([fact, filler, repeat, other], counter, 8, 800)] == ["f1,f2", "f200"]
