"""What a recalled turn adds to the block: content measured by information, and repeats.

A memory block is worth what it tells the model that it does not know. Two
kinds of turn tell it nothing and take budget from turns that do:

- a turn made only of words found all over the user's history ("It was
  great!", "Thanks, Caroline!", "Wow! What did you get?"): each such word is
  in at least ``COMMON_SHARE`` of the user's turns (``ScopeIndex.is_common``,
  the test ``query.focus`` uses for participants' names), so it carries
  less than log(1 / 0.05) ≈ 3 nats of information, and the turn names
  nothing that a later question could be about. Most such turns come in as
  neighbours of a hit, by the support ranking gives them, not by matching.
  Which words are common is read from the user's own history, never from a
  word list: a short history has no common words, so nothing in it is
  dropped, and Chinese counts as English does;
- a turn whose words are (nearly) those of a turn already in the block: a
  repeat says nothing new (``NEAR_DUPLICATE``, the Jaccard overlap of the two
  turns' sets of search terms).

Pure: ``terms_of`` tokenizes once per text (remembered), the tests take the
common-word test as a function.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable

from ..search.bm25 import tokenize

# Two turns whose sets of search terms overlap this much (Jaccard) say the same thing.
NEAR_DUPLICATE = 0.8


@functools.lru_cache(maxsize=65_536)
def terms_of(text: str) -> frozenset[str]:
    """The distinct search terms of ``text`` (``bm25.tokenize``: stop words out, Chinese segmented)."""
    return frozenset(tokenize(text))


def informative(terms: frozenset[str], is_common: Callable[[str], bool]) -> bool:
    """Whether a turn of these terms names anything: one of them is not common in the user's history."""
    return any(not is_common(t) for t in terms)


def near_duplicate(terms: frozenset[str], shown: Iterable[frozenset[str]]) -> bool:
    """Whether ``terms`` overlap those of a turn in ``shown`` by ``NEAR_DUPLICATE`` or more (Jaccard)."""
    size = len(terms)
    for other in shown:
        common = len(terms & other)
        if common and common >= NEAR_DUPLICATE * (size + len(other) - common):
            return True
    return False
