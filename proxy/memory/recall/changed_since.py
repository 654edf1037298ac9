"""Facts a later statement may have changed: shown marked, never ranked, their turns not injected (SPEC §5).

A change read surely is stored as one: a model's or a rule's new value of a
slot supersedes the old (``lifecycle.decide``). A change read loosely cannot
be: the reader by meaning files a home it cannot tell from a visit under a
loose key, a diet it reads beside a rule's, a Chinese statement under one
key for all. Both facts then stand, their cards carry the same day, and a
model cannot tell which is current. So an earlier standing fact (what shapes
every answer: a fact of a moment or a plan is left to be replaced) is marked
(``may have changed since`` on its card) when a later standing fact of the
same person — a guess (``memory_schema.is_guess``: a reading that replaces
nothing), or a fact read surely when the earlier one is a guess (a rule's
"The user has quit nursing" after "I'm a nurse on a night rota" read by
meaning; a sure fact replaces a sure one it changes, or speaks of something
else: a model's facts share names and words with each other) —

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

A change no reader took at all ("These days I take the aisle seat", "We
moved Theo to Hillcrest") leaves no fact to mark with, only the turn, and
the earlier turn it changed is then recalled beside it as if current. So,
among the turns a request may recall, a turn of the user's is marked too
(``turns_changed_later``) when a sentence of a later turn of the user's says
a change outright, more strictly than a fact does (``_TURN_CHANGE``: a long
chat says "since" and "now" of everything; not in a question, nor as the
time of something else: "since I moved here"), and shares with it a search
term that few of the user's turns say (``TOPIC_TURNS``: in a long history
every turn shares some word with many others). A marked turn and the replies
to it stand on a card of their own whose header says so; they are still
shown: what they said was true then. A standing fact read from such turns
is marked with them (``facts_changed_by_turns``) when no reader took the
change that marks them surely as a standing fact: one taken so replaces or
marks the old one itself.

Pure: the facts come in, the ids go out.
"""

from __future__ import annotations

import functools
import re
from collections import defaultdict
from collections.abc import Callable, Container, Iterable, Sequence
from typing import Protocol

from ...store.records import Fragment
from ..lifecycle import CHANGE_SAID, ENDED, is_slot, slot_of
from ..memory_schema import is_guess
from ..search.bm25 import dictionary_words, tokenize
from .cards import ItemFacts
from .query import inflected

# Slots of many values a change of one of them is still read in: a medication switched, a condition gone.
_KINDS = frozenset({"allergies", "medications", "conditions"})
# Said of one thing done in place of another ("I swim every morning instead", "tea instead of coffee"), or of
# how things are now, against how they were ("These days I take the aisle seat").
_INSTEAD = re.compile(r"\b(?:instead|these days|nowadays)\b|而不是|取而代之|这些天来|如今", re.I)
# Said of an addition: the earlier fact stays as it was.
# Not 还 / 也 where they say how things go or which one ("还行", "还好", "还是", "还没", "也好", "也许").
_ADDED = re.compile(r"\b(?:too|also|as well|another|either|additionally|besides)\b"
                    r"|也(?!行|好|许|罢|就|不错|可以)|还(?!行|好|是|没|挺|不错|可以|算|蛮|真|在)|又|另外", re.I)
# Words of a statement's kind, not of its topic: "the user likes hiking" and "I now like jazz" speak of two things.
_ANY_TOPIC = frozenset({"user", "users", "like", "likes", "love", "loves", "enjoy", "enjoys", "prefer", "prefers",
                        "用户", "喜欢", "爱"})
# Words of how news is told in chat, not of what it is about ("Quick note:", "FYI", "Just so you know",
# "跟你说个消息", "先说一下", "提醒一下"): two statements told alike share them whatever they say.
_TELLING = frozenset({"quick", "note", "notes", "fyi", "btw", "heads", "head", "update", "updates", "news", "know",
                      "tell", "told", "say", "said", "mention", "mentioned", "hey", "hi", "hello", "anyway",
                      "说", "先说", "跟", "告诉", "消息", "好消息", "一下", "提醒", "你好", "顺便", "对了"})


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
    changes = [i for i, f in enumerate(ordered) if f.expires_at is None and says_change(f.content)]
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
        # A fact read surely marks only guesses: a model's facts share names and words with each other.
        surely = not is_guess(later.confidence)
        marked.update(ordered[j].id for found in met for j in found
                      if j < i and not (surely and not is_guess(ordered[j].confidence)))
    return frozenset(marked)


# A change a turn says outright: the user (or "we", or one of hers: "my sister", "she"; or no one named, at a
# sentence's start) did what changes or ends a lasting fact, it holds no longer, one thing is done instead of
# another or is so these days, from a day named on, or a clause ends on "now" ("she's Pepper now"); not
# "since", "started" or "now" inside a clause, which a long chat says of everything.
_CHANGED = (r"(?:moved|relocated|switched|changed|quit|left|stopped|gave up|given up|sold|retired|swapped|traded"
            r"|ditched|dropped|renamed|transferred|cancell?ed|replaced|gave away|given away|got rid of|broke up"
            r"|split up|divorced|cut out|outgrew)\b")
_TURN_CHANGE = re.compile(
    r"\b(?:I|we|he|she|(?:my|our) (?!\w+ly\b)\w+)(?:'ve| have| has| had|'d|'s)?\s+(?:\w+ly\s+)?" + _CHANGED +
    # Or with the subject left out, as a chat does at the start of a sentence or after a dash: "Sold the car".
    r"|(?:^|\s[-–—]\s)\s*(?:\w+ly\s+)?" + _CHANGED +
    r"|\b(?:no longer|any ?more|instead|these days|nowadays|from now on)\b"
    # "now" as the end of a time span ("that's all for now", "by now", "until now", "just now", "right now") is
    # the moment said, not a change.
    r"|(?<!\bfor )(?<!\bby )(?<!\btill )(?<!\buntil )(?<!\bjust )(?<!\bright )\bnow\s*(?:[.!,;:—–]|\s-\s|$)"
    r"|\b(?:as of|starting|from) (?:today|tomorrow|this (?:week|month|year)|next (?:week|month|year))\b"
    r"|现在|如今|不再|再也不|从此|搬到|搬去|辞职|离职|退休|调到|换成|改成|戒掉|戒\w{0,2}了|卖掉|卖了|分手|离婚"
    r"|从(?:今天|明天|这周|这个月|今年|下周|下个月|明年)(?:起|开始)", re.I)
# A change told as the time of something else ("since I moved here", "when I quit my job") is a story's
# background, not news: the cue's clause opens with one of these before it.
_AS_A_TIME = re.compile(r"\b(?:since|when|after|before|until|till|once|as soon as|ever since|while)\b", re.I)
# "now" right after what the speaker is doing ("I'm heading out now", "we're eating now") tells what is under
# way, not a change.
_UNDER_WAY = re.compile(r"\b(?:I'm|I am|we're|we are)\s+(?:\w+\s+)?\w+ing(?:\s+(?:out|off|in|up|down|home|back"
                        r"|over|away|to bed))?\s+$", re.I)
_SENTENCE = re.compile(r"[^.!?。！？]+[.!?。！？]*")
_CLAUSE_MARK = re.compile(r"[,;:，；：]")
# A turn's topic word ties it to a later change only when few of the user's turns say it (``TOPIC_TURNS``,
# the two of them included): in a long chat a word said often ("support", "kids") is no one statement's topic.
TOPIC_TURNS = 4


def turns_changed_later(
    turns: Iterable[Fragment], place: Callable[[Fragment], int], said_in: Callable[[str], int],
    changing: Container[int] | None = None, replaced: Container[str] = frozenset(),
) -> frozenset[int]:
    """The ids of the user's turns among ``turns`` that a later one of the user's (by ``place``, its place in
    the history) may have changed: a sentence of it says a change outright (``change_said``) and shares a
    search term with the earlier turn, in any of its -ing / -ed forms, that at most ``TOPIC_TURNS`` of the
    user's turns say (``said_in``: in how many), or a replaced fact was read from it (``replaced``: those
    turns' fragment hashes, ``item_index.replaced_guess_turns``); and of the replies among ``turns`` that
    follow such a turn in its session, which answered what it said then. ``changing``: the ids of the turns
    whose changes count, when not all of them. A turn given twice is one turn."""
    turns = list({t.id: t for t in turns}.values())
    said = sorted(((place(t), t) for t in turns if t.role == "user"), key=lambda p: p[0])
    changes = [(i, topic) for i, (_, t) in enumerate(said)
               if (changing is None or t.id in changing) and (topic := change_said(t.text))]
    marked: set[int] = {t.id for _, t in said if t.hash in replaced}
    if not changes and not marked:
        return frozenset()
    by_word: dict[str, list[int]] = defaultdict(list)  # the turns before the last change, by topic word
    for j, (_, turn) in enumerate(said[: changes[-1][0]] if changes else ()):
        for word in _turn_topic(turn.text):
            by_word[word].append(j)
    for i, topic in changes:
        words = inflected([w for w in topic if said_in(w) <= TOPIC_TURNS])
        marked.update(said[j][1].id for w in words for j in by_word.get(w, ()) if j < i)
    if not marked:
        return frozenset()
    at = {(t.session, t.position): t for t in turns}
    for turn in [t for _, t in said if t.id in marked]:
        step = 1
        while (reply := at.get((turn.session, turn.position + step))) is not None and reply.role != "user":
            marked.add(reply.id)
            step += 1
    return frozenset(marked)


class Sourced(Stated, Protocol):
    """A stored item with the turns it was read from (``store``'s item row has these)."""

    @property
    def fragment_hashes(self) -> Sequence[str]: ...


def facts_changed_by_turns(
    facts: Iterable[Sourced], turn: Callable[[str], Fragment | None], changes: Sequence[tuple[str, Fragment]],
    place: Callable[[Fragment], int], said_in: Callable[[str], int],
) -> frozenset[int]:
    """The ids of standing ``facts`` whose every turn ``turns_changed_later`` marks by a change no reader took
    surely: the user's turns of ``changes`` (fragment hash, turn) that no standing fact read surely was read
    from.

    A change a reader took as a standing fact replaces or marks the old one (``lifecycle.decide``,
    ``changed_later``); a model reads most, and marks of its changes' raw turns would only mark what a shared
    name ties to them ("Maya quit violin" of "my daughter Maya"). A change no reader took so ("We renamed
    the dog, she's Pepper now"; or read only as an event, which replaces nothing) leaves the fact of the
    earlier turn ("The user's dog is called Biscuit") standing as current: it is marked as its turn is.
    ``turn``: the user's turn of a fragment hash.
    """
    facts = [f for f in facts if f.standing]
    taken = {h for f in facts if not is_guess(f.confidence) for h in f.fragment_hashes}
    untaken = [t for h, t in changes if h not in taken]
    if not untaken or not facts:
        return frozenset()
    sources = {f.id: [t for h in f.fragment_hashes if (t := turn(h)) is not None] for f in facts}
    turns = {t.id: t for found in sources.values() for t in found} | {t.id: t for t in untaken}
    marked = turns_changed_later(turns.values(), place, said_in, {t.id for t in untaken})
    return frozenset(i for i, found in sources.items() if found and all(t.id in marked for t in found))


@functools.lru_cache(maxsize=4096)  # a turn comes back in many requests' candidates
def change_said(text: str) -> frozenset[str]:
    """The topic words of the sentences of ``text`` that say a change outright (``_TURN_CHANGE``): statements,
    not questions, that tell no addition, the cue not in a clause that tells the time of something else."""
    words: set[str] = set()
    for sentence in _SENTENCE.findall(text):
        if sentence.rstrip().endswith(("?", "？")) or _ADDED.search(sentence):
            continue
        for cue in _TURN_CHANGE.finditer(sentence):
            clause = _CLAUSE_MARK.split(sentence[: cue.start()])[-1]
            under_way = cue.group().lower().startswith("now") and _UNDER_WAY.search(clause)
            if not _AS_A_TIME.search(clause) and not under_way:
                words |= _turn_topic(sentence)
                break
    return frozenset(words)


@functools.lru_cache(maxsize=4096)
def _turn_topic(text: str) -> frozenset[str]:
    return _topic_words([*tokenize(text), *dictionary_words(text)])


def says_change(text: str) -> bool:
    """Whether ``text`` says a change outright, that something ended or is done instead, and no addition."""
    return bool(CHANGE_SAID.search(text) or ENDED.search(text) or _INSTEAD.search(text)) and not _ADDED.search(text)


def _topic(fact: Stated, terms: Iterable[str]) -> tuple[str | None, frozenset[str]]:
    slot = slot_of(fact.key)
    one = is_slot(slot) or slot.rpartition(".")[2] in _KINDS
    return (slot if one else None), _topic_words(terms)


def _topic_words(terms: Iterable[str]) -> frozenset[str]:
    """The search terms that say what a statement is about: not its kind (``_ANY_TOPIC``), nor how it is
    told (``_TELLING``), nor a cue word."""
    return frozenset(t for t in terms if t not in _ANY_TOPIC and t not in _TELLING and not _cue(t))


@functools.lru_cache(maxsize=4096)
def _cue(term: str) -> bool:
    """Whether ``term`` is a word of a change or an addition itself ("now", 现在): not a topic."""
    return any(p.fullmatch(term) for p in (CHANGE_SAID, ENDED, _INSTEAD, _ADDED))
