"""Facts a later statement may have changed: shown marked, never ranked, their turns not injected (SPEC §5).

A change read surely is stored as one: a model's or a rule's new value of a
slot supersedes the old (``lifecycle.decide``). A change read loosely cannot
be: the reader by meaning files a home it cannot tell from a visit under a
loose key, a diet it reads beside a rule's, a Chinese statement under one
key for all. Both facts then stand, their cards carry the same day, and a
model cannot tell which is current. So an earlier standing fact (what shapes
every answer: a fact of a moment or a plan is left to be replaced) is marked
(``may have changed since`` on its card) when a later standing guess
(``memory_schema.is_guess``: a reading that replaces nothing; a fact read
surely replaces what it changes, or speaks of something else) of the same
person

- speaks of the same thing: the same slot (``lifecycle.slot_of``: a loose
  key's slot is its own key's, ``user.diet.facts`` is ``user.diet``'s),
  when that slot names one fact or one kind of health fact (``_KINDS``), or
  a search term of content in common, in any of its -ing / -ed forms
  (``bm25.tokenize``, ``query.inflected``: "nurse" and "nursing"; not the
  words every statement of a taste shares, ``_ANY_TOPIC``, nor the cue words
  below);
- lasts (has no expiry: "I'm in Paris now, till Friday" changes no home)
  and says a change outright (``lifecycle.CHANGE_SAID``: "moved", "now",
  "switched", "since", 现在, 已经, 搬…, that something ended, or that one
  thing is done "instead" of another), and not an addition ("too", "also",
  也, 还…).

The mark is a hedge, not a supersede: an addition misread as a change costs
the earlier fact its place among the hits and the profile's first places,
not the fact. Marked facts come after the others in the profile, never rank
as hits nor follow the profile, and the turns they were read from are not
injected: the later value is the one recall shows as current.

Pure: the facts come in, the ids go out.
"""

from __future__ import annotations

import functools
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from ..lifecycle import CHANGE_SAID, ENDED, is_slot, slot_of
from ..memory_schema import is_guess
from ..search.bm25 import tokenize
from .cards import ItemFacts
from .query import inflected

# Slots of many values a change of one of them is still read in: a medication switched, a condition gone.
_KINDS = frozenset({"allergies", "medications", "conditions"})
# Said of one thing done in place of another: "I swim every morning instead", "tea instead of coffee".
_INSTEAD = re.compile(r"\binstead\b|而不是|取而代之", re.I)
# Said of an addition: the earlier fact stays as it was.
_ADDED = re.compile(r"\b(?:too|also|as well|another|either|additionally|besides)\b|也|还|又|另外", re.I)
# Words of a statement's kind, not of its topic: "the user likes hiking" and "I now like jazz" speak of two things.
_ANY_TOPIC = frozenset({"user", "users", "like", "likes", "love", "loves", "enjoy", "enjoys", "prefer", "prefers",
                        "用户", "喜欢", "爱"})


class Stated(ItemFacts, Protocol):
    """What the mark reads of a stored item: its card's fields and its key (``store``'s item row has these)."""

    @property
    def key(self) -> str: ...
    @property
    def expires_at(self) -> str | None: ...
    @property
    def standing(self) -> bool: ...
    @property
    def confidence(self) -> float: ...


def changed_later(
    facts: Sequence[Stated], terms: Callable[[Stated], Iterable[str]] | None = None
) -> frozenset[int]:
    """The ids of ``facts`` that a later one of them may have changed (``terms``: a fact's search terms,
    when the caller has them; else they are read here)."""
    ordered = sorted((f for f in facts if f.standing), key=lambda f: (f.created, f.id))
    changes = [i for i, f in enumerate(ordered)
               if is_guess(f.confidence) and f.expires_at is None and says_change(f.content)]
    if not changes:
        return frozenset()
    read = terms or (lambda f: tokenize(f.content))
    # Who spoke of what, by slot and by word: a change meets the facts before it through these, not one by one.
    by_slot: dict[tuple[str, str], list[int]] = defaultdict(list)
    by_word: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, fact in enumerate(ordered[: changes[-1]]):
        slot, words = _topic(fact, read(fact))
        if slot is not None:
            by_slot[fact.about, slot].append(i)
        for word in words:
            by_word[fact.about, word].append(i)
    marked: set[int] = set()
    for i in changes:
        later = ordered[i]
        slot, words = _topic(later, read(later))
        # A word's other -ing / -ed forms are looked up from the later fact's side only: "nursing" finds
        # "nurse" and "nurse" finds "nursing" (``query.inflected`` goes both ways).
        met = [by_slot.get((later.about, slot), ()) if slot is not None else (),
               *(by_word.get((later.about, w), ()) for w in inflected(list(words)))]
        marked.update(ordered[j].id for found in met for j in found if j < i)
    return frozenset(marked)


def says_change(text: str) -> bool:
    """Whether ``text`` says a change outright, that something ended or is done instead, and no addition."""
    return bool(CHANGE_SAID.search(text) or ENDED.search(text) or _INSTEAD.search(text)) and not _ADDED.search(text)


def _topic(fact: Stated, terms: Iterable[str]) -> tuple[str | None, frozenset[str]]:
    slot = slot_of(fact.key)
    one = is_slot(slot) or slot.rpartition(".")[2] in _KINDS
    return (slot if one else None), frozenset(t for t in terms if t not in _ANY_TOPIC and not _cue(t))


@functools.lru_cache(maxsize=4096)
def _cue(term: str) -> bool:
    """Whether ``term`` is a word of a change or an addition itself ("now", 现在): not a topic."""
    return any(p.fullmatch(term) for p in (CHANGE_SAID, ENDED, _INSTEAD, _ADDED))
