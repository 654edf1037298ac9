"""Lasting facts read by meaning when no model extracts: a user's sentence near labelled examples.

The rules (``rules.py``) read a fact only when its words match a pattern, so
a lasting fact said in other words ("Shellfish and I do not get along") is
missed when the extraction model is off or its reply unusable. This reader
takes the user's sentences that no rule read and compares each, in the
embedding model's space, with ``standing_examples.json``: sentences of our
own writing, labelled by the slot of a lasting fact they state (an allergy,
a diet, a home, a job, a pet...) or ``none`` (thanks, requests, what happens
today, what is true of an office or a friend). A sentence whose closest
examples are of one slot, clearly closer than any ``none`` example, is kept
as that slot's fact, in the user's own words, standing.

Only the user's statements about themself qualify: "I", "we", "me" or "us"
is said, or left out as chat leaves it out ("Moved to Leeds in May": read as
"I moved to Leeds in May", ``spoken``; not a line said to the listener,
"Wishing you the best!"), or "my" / "our" owns something that is not
another person or a body of people (``speaks_of_self``: "beef never touches
my plate", "our flat is in Leeds"; not "my friend lives in Paris", "our
office moved", "my sister is vegan": those are not the user's facts, and a
slot read from them would be filed as the user's), in at most ``MAX_WORDS``
words, not a question, not supposed, wished or only intended ("thinking
about getting a cat", "it's been a dream to have a family"), not said of a
time that ends soon (``for_now``) or of one moment past ("yesterday", "just
got back"). A sentence of more than
``SHORT_WORDS`` is kept as its clause that reads as a fact of the same slot
most surely, a clause in which "I", "we", "me" or "us" speaks: a part cut out
by its commas that only owns something ("our rabbit") is a phrase, not a
fact; with no such clause, it is kept whole (``whole``: then a one-value slot
takes only its loose key, below). A sentence of more than one clause, long or
short, whose whole reads as no fact (the rest of it drowns what one clause
states: "the week has been a blur of meetings, but I'm vegetarian, so…",
"I've got type 1 diabetes, so I watch carbs on trips") is read by its
clauses, and the one that reads as a fact most surely, of any slot, is kept.
What is read so is a guess (``CONFIDENCE``, ``memory_schema.is_guess``): the
profile gives guesses only the room its surer facts leave, and a guess
replaced hides no turn. A slot of many values (an allergy, a like) is filed under a key
that names a kind of fact (``user.allergies``): each sentence adds one. A home,
a job or a pregnancy is one value (``one_value``), and nearness to examples
does not tell a new home from a visit, or a job from one looked for ("I
visited my parents in Ohio", "I'm looking for a job in finance"): a wrong
supersede would hide a true value and its turns. Such a sentence is filed
under the slot's loose key (``lifecycle.LOOSELY_READ``: ``user.said.home``),
where it replaces only the last one read so, and the slot's own value (a
rule's, a model's) replaces it in turn. Only a change said outright ("we
moved", "I'm in Bristol now", "I left accounting": ``lifecycle.CHANGE_SAID``) past a
stricter bar (``CHANGE_FLOOR``, ``CHANGE_MARGIN``) takes the slot's own key
and replaces its value.

The bundled model reads English: a sentence in Chinese is left to the
rules. The thresholds are set in the bundled model's space; another
embedding model does not get this reader (``memory_layer``).

The arithmetic is pure (``classify``); ``MeaningReader`` embeds, once the
examples and then each batch's sentences, through the index's embedder.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ...offload import off_loop
from ..lifecycle import CHANGE_SAID, LOOSELY_READ
from ..memory_schema import STANDS_BY_DEFAULT, TYPE_OF_CATEGORY, USER, Category, MemoryItem
from .asking import asking
from .rule_patterns import chinese, for_now, subject_dropped, supposed, with_subject
from .rules import Said

EXAMPLES = Path(__file__).with_name("standing_examples.json")
NONE = "none"
# The mean cosine of a sentence's closest examples of a slot (``NEAREST``), at least ``FLOOR``, and
# ahead of the closest ``none`` examples' by at least ``MARGIN``; a change said outright takes a one-value
# slot past ``CHANGE_FLOOR`` and ``CHANGE_MARGIN``. Set in the bundled model's space on sentences of our
# own (bench/data/meaning-calibration.json), the scenario suite's tuning half and LoCoMo's A half.
NEAREST = 3
FLOOR = 0.35
MARGIN = 0.08
CHANGE_FLOOR = 0.45
CHANGE_MARGIN = 0.12
IMPORTANCE = 0.5  # below a rule's reading (0.6–0.9): the profile prefers a fact read by its words
CONFIDENCE = 0.5  # a guess (``memory_schema.is_guess``)

# The user as the one the sentence is about: "I" (as written: a lower-case "i" is too often something else),
# "we", "me" or "us" ("US" is a country).
_SPEAKER = re.compile(r"\bI\b|\b(?:[Ww]e|WE)(?:'re|'ve|'d)?\b|\b(?:[Mm]e|ME|[Uu]s)\b")
# Or the user as owner: "my" / "our" and the (up to three) words after it, which say what is owned.
_OWNER = re.compile(r"\b(?:[Mm]y|MY|[Oo]ur|OUR)((?:\s+[A-Za-z][\w-]*(?:'s)?){1,3})")
# What a user owns that is someone else, whose facts are theirs, not the user's: a person (kin, partners,
# friends, the people of their work or home) or a body of people (a workplace, a school, a team). A closed
# class of words, whole or as a part of a compound ("mother-in-law"), in the singular or plural, possessive or
# not ("friends", "coworker's"); pets are in the user's care and are the user's (the ``pet`` slot).
_SOMEONE_ELSE = re.compile(
    r"(?:mom|mum|mommy|mother|mama|dad|daddy|father|papa|parent|sister|brother|sibling|son|daughter|kid|child"
    r"|children|baby|babies|toddler|twin|teenager|wife|wives|husband|partner|spouse|boyfriend|girlfriend"
    r"|fiance|fiancee|fiancé|fiancée|ex|grandma|grandmother|grandpa|grandfather|grandparent|granny|grandson"
    r"|granddaughter|grandchild|grandchildren|grandkid|aunt|uncle|cousin|nephew|niece|family|families"
    r"|relative|in-law|stepson|stepdaughter|stepmom|stepmother|stepdad|stepfather|friend|buddy|roommate"
    r"|flatmate|housemate|neighbor|neighbour|boss|manager|colleague|coworker|co-worker|teammate|employee"
    r"|staff|client|customer|student|pupil|patient|tenant|landlord|landlady|guest|doctor|teacher|therapist"
    r"|coach|office|company|companies|firm|employer|team|department|school|class|classes|university"
    r"|building|club|church|business|businesses|startup|store|shop|restaurant|group|band|people|folks|guys)"
    r"(?:s|es|'s|s')?$", re.I)
# Said of one moment past: an event, not a lasting fact.
_ONE_MOMENT = re.compile(
    r"\b(?:yesterday|last night|this morning|this afternoon|this evening|earlier|just now|a minute ago"
    r"|just (?:got|came|had|finished|bought|watched|saw|read|tried|ate|left|arrived|woke))\b", re.I)
# The one spoken to: a line that left its subject out and speaks of them is said to them ("Wishing you the
# best!", "Taking in kids in need - you're so kind"), not of the speaker.
_LISTENER = re.compile(r"\byou(?:r|rs|'re|'ve|'d|'ll)?\b", re.I)
# Only intended, considered or wished: what it would be is not yet a fact ("Thinking about getting a cat",
# "I might move to Leeds", "I want to learn piano", "it's been a dream to have a family").
_INTENDED = re.compile(
    r"\b(?:thinking (?:about|of)|planning(?: to| on)?|plan to|hoping to|hope to|considering|want(?:ing)? to"
    r"|wanna|would like to|'d like to|might|wondering|dream(?:s|ed|ing)? (?:of|about|to)|a dream to)\b", re.I)
_WORD = re.compile(r"[A-Za-z][\w'-]*")
# A sentence of more words is read no further: it tells a story more often than it states a fact.
MAX_WORDS = 40
# A fact read in a sentence of more words is kept as the clause of it that states it (``clauses``), so that
# its card says the fact in few tokens ("Just so you know, I've been meat-free since college, so no steak
# please" keeps "I've been meat-free since college").
SHORT_WORDS = 15
_CLAUSE_END = re.compile(
    r"\s*(?:[,;:()]|\s[-–—]\s|\b(?:but|so|because|which|though|although)\b|\band\b(?=\s+(?:I|we)\b))\s*", re.I)

Embed = Callable[[Sequence[str]], Awaitable[npt.NDArray[Any]]]


@dataclass(frozen=True)
class Slot:
    name: str
    category: Category
    key: str  # a kind of fact that holds many values, or the slot's own key (``one_value``)
    one_value: bool = False


@dataclass(frozen=True)
class Examples:
    slots: dict[str, Slot]
    texts: tuple[str, ...]
    labels: tuple[str, ...]  # each text's slot name, or NONE


@functools.cache
def examples() -> Examples:
    raw = json.loads(EXAMPLES.read_text(encoding="utf-8"))
    slots = {name: Slot(name, s["category"], s["key"], bool(s.get("one_value"))) for name, s in raw["slots"].items()}
    pairs = [(text, label) for label, texts in raw["examples"].items() for text in texts]
    return Examples(slots, tuple(t for t, _ in pairs), tuple(label for _, label in pairs))


def statement(sentence: str, *, owner: bool = True) -> bool:
    """Whether ``sentence`` can state a lasting fact of the speaker's: a first person says it (``owner``:
    or owns something in it), in 2 to ``MAX_WORDS`` words, not asking, not supposing, not of a time that ends
    soon or of one moment past."""
    text = sentence.strip()
    if not text or asking(text) or chinese(text):
        return False
    speaks = (_SPEAKER.search(text) is not None or (owner and speaks_of_self(text))
              or (subject_dropped(text) is not None and not _LISTENER.search(text)))
    if not 2 <= len(_WORD.findall(text)) <= MAX_WORDS or not speaks:
        return False
    return not supposed(text, 0) and not for_now(text) and not _ONE_MOMENT.search(text) and not _INTENDED.search(text)


def spoken(sentence: str) -> str:
    """``sentence`` with the subject chat left out said again (``rule_patterns.subject_dropped``: "Moved to
    Leeds in May" is read as "I moved to Leeds in May", "Working nights these days" as "I'm working nights
    these days"), so that it is compared with the examples as the statement of the user's it is; else as
    it is. What is kept is the user's own words."""
    dropped = subject_dropped(sentence)
    if dropped is None:
        return sentence
    at, subject = dropped
    return sentence[:at] + with_subject(sentence, at, subject)


def speaks_of_self(text: str) -> bool:
    """Whether the user is who ``text`` is about: a first person is its subject or object, or owns something
    in it that is not someone else (``someone_else``)."""
    if _SPEAKER.search(text):
        return True
    return any(not any(someone_else(w) for w in m.group(1).split()) for m in _OWNER.finditer(text))


def someone_else(word: str) -> bool:
    """Whether ``word`` names someone else, whole or by a part of it ("mother-in-law", "ex-wife")."""
    return any(_SOMEONE_ELSE.match(part) for part in (word, *word.split("-")))


def _statements(unread: Sequence[Said]) -> list[Said]:
    return [(index, sentence) for index, sentence in unread if statement(sentence)]


def clauses(sentence: str) -> list[str]:
    """The parts of a long sentence between commas and the words that join clauses, each a statement in
    which a first person speaks: a part cut out by its commas that only owns something ("our rabbit",
    "my plate") is a phrase, not a fact."""
    return [c for part in _CLAUSE_END.split(sentence) if statement(c := part.strip(), owner=False)]


def classify(
    vectors: npt.NDArray[Any], example_vectors: npt.NDArray[Any], labels: Sequence[str]
) -> list[tuple[str, float, float]]:
    """Each sentence's closest slot: (slot, the mean cosine of its ``NEAREST`` closest examples, how far
    that is ahead of ``none``'s). Rows are unit vectors; a slot is never ``none`` itself."""
    if len(vectors) == 0:
        return []
    names = sorted(set(labels))
    sims = np.asarray(vectors, dtype=np.float32) @ np.asarray(example_vectors, dtype=np.float32).T
    by_label = np.array(labels)
    scores = np.empty((len(vectors), len(names)), dtype=np.float32)
    for j, name in enumerate(names):
        block = sims[:, by_label == name]
        k = min(NEAREST, block.shape[1])
        scores[:, j] = -np.sort(-block, axis=1)[:, :k].mean(axis=1)
    none = scores[:, names.index(NONE)] if NONE in names else np.full(len(vectors), -1.0, dtype=np.float32)
    found = []
    for row, none_score in zip(scores, none, strict=True):
        ranked = [(float(s), n) for s, n in zip(row, names, strict=True) if n != NONE]
        score, name = max(ranked)
        found.append((name, score, score - float(none_score)))
    return found


def accepted(score: float, margin: float) -> bool:
    return score >= FLOOR and margin >= MARGIN


def key_for(slot: Slot, sentence: str, score: float, margin: float, *, whole: bool = False) -> str:
    """Where ``sentence`` is filed: a slot of many values' key; a slot of one value's own key for a change
    said outright past the stricter bar in a short sentence or clause, else its loose key (``whole``: a long
    sentence kept whole, no clause of it read: what changed in it is not told apart from the story around)."""
    if not slot.one_value:
        return slot.key
    if not whole and CHANGE_SAID.search(sentence) and score >= CHANGE_FLOOR and margin >= CHANGE_MARGIN:
        return slot.key
    return LOOSELY_READ[slot.key]


def item_of(slot: Slot, index: int, sentence: str, score: float, margin: float, *, whole: bool = False) -> MemoryItem:
    """The fact ``sentence`` states, in the user's words."""
    return MemoryItem(
        type=TYPE_OF_CATEGORY[slot.category], category=slot.category, standing=STANDS_BY_DEFAULT[slot.category],
        content=sentence, key=key_for(slot, sentence, score, margin, whole=whole), about=USER,
        importance=IMPORTANCE, confidence=CONFIDENCE, source="user-stated", turns=(index,),
    )


class MeaningReader:
    """Reads lasting facts from the sentences no rule read, through ``embed`` (the index's embedder)."""

    def __init__(self, embed: Embed) -> None:
        self.embed = embed
        self._examples: npt.NDArray[Any] | None = None

    async def read(self, unread: Sequence[Said]) -> list[MemoryItem]:
        """The facts read in ``unread``, in order; the pure work off the event loop when it is a lot of text."""
        size = sum(len(sentence) for _, sentence in unread)
        said = await off_loop(size, _statements, unread)
        if not said:
            return []
        known = examples()
        if self._examples is None:
            self._examples = await self.embed(list(known.texts))
        vectors = await self.embed([spoken(sentence) for _, sentence in said])
        read = await off_loop(size, classify, vectors, self._examples, known.labels)
        items = []
        for (index, sentence), (name, score, margin) in zip(said, read, strict=True):
            if not accepted(score, margin):
                if len(_CLAUSE_END.split(sentence)) > 1:  # of any length: "I have a cat, Miso, who hates trains."
                    found = await self._clause(sentence, None)
                    if found is not None:
                        part, name, score, margin = found
                        items.append(item_of(known.slots[name], index, part, score, margin))
                continue
            whole = False
            if len(_WORD.findall(sentence)) > SHORT_WORDS:
                found = await self._clause(sentence, name)
                if found is not None:
                    sentence, name, score, margin = found
                whole = found is None
            items.append(item_of(known.slots[name], index, sentence, score, margin, whole=whole))
        return items

    async def _clause(self, sentence: str, slot: str | None) -> tuple[str, str, float, float] | None:
        """The short clause of a long ``sentence`` read as a fact of its ``slot`` most surely, if one is: a
        clause of another slot reads something else than what the sentence was read for."""
        parts = [c for c in clauses(sentence) if len(_WORD.findall(c)) <= SHORT_WORDS]
        if not parts or self._examples is None:
            return None
        read = classify(await self.embed([spoken(p) for p in parts]), self._examples, examples().labels)
        found = [(part, *r) for part, r in zip(parts, read, strict=True) if slot in (None, r[0]) and accepted(r[1], r[2])]
        return max(found, key=lambda f: f[2], default=None)
