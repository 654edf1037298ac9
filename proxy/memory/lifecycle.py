"""Pure lifecycle decisions for memory items (SPEC §5): dedup, conflicts, expiry.

No database and no clock: ``remember`` asks ``decide`` what to do with a new
item against the user's active ones, and the store executes the answer. An
item's expiry is read here once (``expiry_epoch``) and stored as a number the
database compares, so the cleanup job is SQL; recall asks ``is_expired`` to
leave out an item that expired since.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from ..store.records import ItemRow
from .memory_schema import CATEGORIES, TYPES, USER, MemoryItem

Action = Literal["add", "merge", "supersede"]
Vector = npt.NDArray[Any]

# Words that flip or carry a fact's value: "likes" vs "no longer likes", "8865" vs "1234".
_NEGATION = re.compile(r"\b(?:not|no|never|don't|doesn't|didn't|stopped|dislikes?|hates?)\b"
                       r"|n't\b|不|没|别|讨厌", re.I)
_NUMBER = re.compile(r"\d+(?:[.,:/-]\d+)*")
# Words every statement about the user shares; they say nothing about the value.
_FILLER = frozenset({"a", "an", "the", "is", "are", "has", "have", "to", "of", "user", "user's",
                     "的", "了", "是", "用", "户"})


# Before 2026-11-30, ``rule_patterns.slug`` cut these words off a slot name's start even inside a word
# ("animals" → "nimals", "apples" → "pple"); items stored then keep those keys. Before 2026-12-01 it
# also cut the "s" of a last word in -is or -us ("tennis" → "tenni").
_OLD_SLUG_CUT = re.compile(r"^(?:the|a|an|my|some|any)")
_OLD_SLUG_S = re.compile(r"(?<=\w{2}[iu])s$")
# A change said outright: the value said replaces the one before ("we moved", "I'm in Bristol now", "I left
# accounting"; 现在, 已经, 搬, 辞职). The reader by meaning files a one-value slot's fact under its own key only
# when it says one (``extraction/meaning.py``); recall marks an earlier fact a later one may change (``later``).
CHANGE_SAID = re.compile(
    r"\b(?:moved|relocated|now|since|switched|changed|left|quit|no longer|became|started|settled)\b"
    r"|现在|如今|已经|不再|改|换|搬|辞职|离职|跳槽|转行|入职|调到|更正|开始", re.I)
# A statement that an activity or habit ended: it ends every taste its slot refines
# ("has stopped running" ends "loves running marathons", user.preference.running_marathon).
# 戒 only as "gave up X" (戒了, 戒掉, 戒咖啡了), not inside 戒指 (a ring).
ENDED = re.compile(r"\b(?:stopped|quit|given up|gave up|no longer|anymore|any more)\b|不再|再也不|戒掉|戒\w{0,2}了", re.I)


# Slots of one value that a reader by nearness (``extraction/meaning.py``) also fills, and the key it files a
# value under when it cannot tell a change from a visit: a value of the slot's own key replaces that one too,
# a value of that key replaces only its like.
LOOSELY_READ: dict[str, str] = {
    "user.location.home": "user.said.home",
    "user.occupation": "user.said.job",
    "user.health.pregnancy": "user.said.pregnancy",
}


def slot_keys(key: str) -> frozenset[str]:
    """The stored keys that name ``key``'s slot: itself, the keys the old ``slug`` made of it, and the key
    its loosely read values are filed under (``LOOSELY_READ``).

    Computed once per new item; an existing item is in the slot when its key is in this set.
    """
    parts = key.split(".")
    keys = {key}
    if key in LOOSELY_READ:
        keys.add(LOOSELY_READ[key])
    for n in range(1, len(parts)):
        cut = _OLD_SLUG_CUT.sub("", parts[n], count=1)
        if cut and cut != parts[n]:
            keys.add(".".join([*parts[:n], cut, *parts[n + 1 :]]))
    keys.update(_OLD_SLUG_S.sub("", k) for k in list(keys))
    return frozenset(keys)


_OWN_KEY = {loose: own for own, loose in LOOSELY_READ.items()}


def slot_of(key: str) -> str:
    """The slot ``key`` files a value under: a loosely read value's slot is its own key's
    (``user.said.home`` → ``user.location.home``), a kind of fact under a slot is the slot's
    (``user.diet.facts`` → ``user.diet``)."""
    own = _OWN_KEY.get(key, key)
    head, _, last = own.rpartition(".")
    return head if last in _KINDS_OF_FACT and "." in head else own


def slot_members(new: MemoryItem, active: Sequence[ExistingItem]) -> list[ExistingItem]:
    """The active items ``new`` speaks for: those of its slot, and, when it says something ended,
    those of the narrower slots under it (``user.preference.running_marathon`` under ``…running``).

    A slot is a key that names one fact (``is_slot``), held by the same one: the user, or
    someone else (``about``). A key that names a kind of fact (``user.likes``) holds many.
    """
    if not is_slot(new.key):
        return []
    slot = slot_keys(new.key)
    ended = bool(ENDED.search(new.content))
    mine = [e for e in active if (e.about == USER) == new.about_user]
    return [e for e in mine if e.key in slot or (ended and _refines(e.key, new.key))]


# The last part of a key that names a kind of fact rather than one fact: such a key
# ("user.likes", "melanie.activities", "user.preference") is shared by facts that are all true at once.
_KINDS_OF_FACT = frozenset({
    *CATEGORIES, *TYPES, "like", "likes", "love", "loves", "dislike", "dislikes", "interest", "interests",
    "hobby", "hobbies", "activity", "activities", "fact", "facts", "info", "information", "detail", "details",
    "note", "notes", "misc", "general", "events", "plans", "preferences", "personal", "experience",
    "experiences", "thing", "things", "life", "family", "friends", "pets", "news", "update", "updates",
    "memory", "memories", "statement", "statements", "tasks", "goals", "achievements", "opinion", "opinions",
    # Collections a model names with a plural; a plural is not read from a final "s" (diabetes, glasses).
    "allergies", "medications", "conditions", "foods", "places", "trips", "books", "movies", "songs",
    "skills", "languages", "people", "budgets", "channels", "devices",
})


def is_slot(key: str) -> bool:
    """Whether a key names one fact, whose later value replaces the earlier (``user.location.home``),
    rather than a kind of fact many values share (``_KINDS_OF_FACT``)."""
    parts = key.split(".")
    return len(parts) >= 2 and parts[-1] not in _KINDS_OF_FACT


def _refines(key: str, broader: str) -> bool:
    head, _, last = broader.rpartition(".")
    return "." in head and key.startswith(f"{head}.{last}_")


@dataclass(frozen=True)
class ExistingItem:
    """A stored item of the same (tenant, user) as the new one; ``vector`` is L2-normalised."""

    id: str
    key: str
    content: str
    vector: Vector
    status: str = "active"  # "active" | "superseded" | "archived"
    about: str = USER
    category: str = "other"
    standing: bool = False

    @classmethod
    def of(cls, row: ItemRow, vector: Vector) -> ExistingItem:
        return cls(str(row.id), row.key, row.content, vector, row.status, row.about, row.category, row.standing)


@dataclass(frozen=True)
class Decision:
    """What to do with a new item.

    - ``add``: store it; ``target_ids`` is empty.
    - ``merge``: do not store it; bump the seen count and time of ``target_ids[0]``.
    - ``supersede``: store it and mark every item in ``target_ids`` superseded.
    """

    action: Action
    target_ids: tuple[str, ...] = ()
    reason: str = ""


def decide(
    new: MemoryItem, new_vec: Vector, existing: Sequence[ExistingItem], dedup_cosine: float
) -> Decision:
    """Add, merge or supersede, by SPEC §5's rules; only ``active`` existing items count.

    Same slot (``slot_members``: the same key naming one fact, of the same
    holder, or a narrower one under an ended activity): the same value
    merges, a different value supersedes (the newer statement wins — a
    paraphrase superseding a paraphrase loses nothing, while merging a real
    change would lose it) — but a value said for a while (it expires: "I'm
    vegetarian this week") replaces no standing value, which holds again once
    the while is over: it is added beside it. Otherwise, a shared key string included: within
    ``dedup_cosine`` merges, unless numbers or negation differ (then they are
    two facts), else it is added.
    """
    active = [e for e in existing if e.status == "active"]
    same_key = slot_members(new, active)
    for item in same_key:
        if same_value(item.content, new.content):
            return Decision("merge", (item.id,), "same key, same value")
    replaced = [e for e in same_key if new.expires_at is None or not e.standing]
    if replaced:
        return Decision("supersede", tuple(e.id for e in replaced), "same key, new value")
    if same_key:
        return Decision("add", (), "same key, a value for a while beside the standing one")
    best = _nearest(new_vec, active)
    if best is not None and best[1] >= dedup_cosine and not _clearly_differs(best[0].content, new.content):
        return Decision("merge", (best[0].id,), f"near duplicate (cosine {best[1]:.3f})")
    return Decision("add", (), "new fact")


def stands_in_place(new: MemoryItem, replaced_standing: bool) -> bool:
    """Whether ``new``, replacing facts of which one stood (``replaced_standing``), is to stand itself.

    A model files a changed fact as it reads the new words ("accepted an
    offer from Spotify, starting Monday" as a plan); the fact it replaces
    shaped every answer, and its new value must, or the profile loses it. A
    value that expires stays what it was filed as.
    """
    return replaced_standing and not new.standing and new.expires_at is None


def same_value(a: str, b: str) -> bool:
    """Two statements of one fact: equal content words (case, punctuation, articles ignored)."""
    return _content_words(a) == _content_words(b)


def _content_words(text: str) -> frozenset[str]:
    words = re.findall(r"[\w']+", text.lower())
    # CJK runs are not split into words, so compare their characters instead.
    tokens = [ch for w in words for ch in (w if re.match(r"[\u4e00-\u9fff]", w) else [w])]
    return frozenset(_stem(t) for t in tokens if t not in _FILLER)


def _stem(word: str) -> str:
    # Crude on purpose: only needs "allergic"/"allergy" and "peanuts"/"peanut" to meet.
    for suffix in ("ies", "ic", "y", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def _clearly_differs(a: str, b: str) -> bool:
    negated = bool(_NEGATION.search(a)) != bool(_NEGATION.search(b))
    return negated or set(_NUMBER.findall(a)) != set(_NUMBER.findall(b))


def _nearest(vec: Vector, items: Sequence[ExistingItem]) -> tuple[ExistingItem, float] | None:
    scored = [(item, cosine(vec, item.vector)) for item in items]
    comparable = [(item, score) for item, score in scored if score is not None]
    return max(comparable, key=lambda pair: pair[1]) if comparable else None


def cosine(a: Vector, b: Vector) -> float | None:
    # Vectors from another embedding model (a config change) cannot be compared: skip them.
    if a.shape != b.shape:
        return None
    norm = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(np.dot(a, b)) / norm if norm else None


def _aware(moment: datetime) -> datetime:
    # Naive timestamps are stored in UTC throughout Paperclip.
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def expiry_moment(expires_at: str | datetime | None) -> datetime | None:
    """When an item stops being true; a bare date means "through that day" (UTC).

    None for no expiry or an unreadable value: junk never deletes a memory.
    """
    if expires_at is None or isinstance(expires_at, datetime):
        return None if expires_at is None else _aware(expires_at)
    text = expires_at.strip()
    try:
        if len(text) == 10:
            day = date.fromisoformat(text)
            if day == date.max:  # "through 9999-12-31": the day after cannot be represented
                return datetime.max.replace(tzinfo=UTC)
            return datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(days=1)
        return _aware(datetime.fromisoformat(text))
    except ValueError:
        return None


def expiry_epoch(expires_at: str | None) -> float | None:
    """``expiry_moment`` in epoch seconds, the form the store compares; None never expires."""
    moment = expiry_moment(expires_at)
    return None if moment is None else moment.timestamp()


def is_expired(expires_at: str | datetime | None, now: datetime) -> bool:
    """True once ``now`` has reached the item's expiry; never for no or unreadable expiry."""
    moment = expiry_moment(expires_at)
    return moment is not None and _aware(now) >= moment
