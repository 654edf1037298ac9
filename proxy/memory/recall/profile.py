"""The profile: a user's standing facts, leading the memory block on every request (SPEC §5).

Pure: the items and ``now`` come in, cards go out; no store, no clock. A
standing fact is an active, unexpired item the user stated (not one inferred)
of at least ``MIN_IMPORTANCE`` in one of four kinds, rendered in this order:

1. health and safety — allergies (the user's or someone in their care), diet,
   pregnancy, medication, conditions;
2. identity — name, nickname, language, home, pronouns, occupation, and the
   names of the people and pets in the user's life;
3. durable preferences — every ``preference`` item;
4. open tasks and deadlines.

Which facts make the budget is decided by importance × recency
(``importance · 2^(-age / HALF_LIFE_DAYS)``). Every item decays at the same
rate, so the order of two items never depends on ``now``: the key below is the
score's logarithm without the term that ``now`` adds to every item alike.
The block is therefore byte-stable — same items, same bytes — which keeps the
upstream's prompt cache warm; only an added, changed, superseded or expired
fact changes it. Dates on cards are creation dates, which a merge never moves.
"""

from __future__ import annotations

import datetime as dt
import functools
import math
import re
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from ...config import Memory
from ...tokens import TokenCounter
from ..lifecycle import expiry_moment, is_expired
from .cards import Card, CardKind, CardSource, render_block, render_card

MIN_IMPORTANCE = 0.5
# Only what the user said of themself stands: an inference may be wrong, and the profile is never questioned.
STATED = "user-stated"
HALF_LIFE_DAYS = 180.0
# No card fits in less room than this; past this many standing facts none would make the budget.
MIN_CARD_TOKENS = 8
SCAN_LIMIT = 40

KINDS = ("health", "identity", "preference", "task")

_HEALTH = re.compile(
    r"(?:^|\.)(?:allerg\w*|diet\w*|vegetarian|vegan|halal|kosher|health|medical|medications?"
    r"|pregnan\w*|intoleran\w*|conditions?|disabilit\w*)(?:\.|_|$)"
)
_IDENTITY = re.compile(
    r"^user\.(?:name|nickname|language|pronouns|occupation|job|location\.home|home)(?:\.|$)"
    r"|^user\.\w+\.(?:name|nickname)$"  # the names of the people and pets in the user's life
)
_TASK = re.compile(r"^user\.(?:task|deadline|reminder)s?(?:\.|$)")
_CARD_KINDS: frozenset[str] = frozenset({"entity", "preference", "event", "task", "constraint"})


class Fact(Protocol):
    """What the profile reads of a stored item (``store``'s item row has these fields)."""

    @property
    def id(self) -> int: ...
    @property
    def type(self) -> str: ...
    @property
    def key(self) -> str: ...
    @property
    def content(self) -> str: ...
    @property
    def importance(self) -> float: ...
    @property
    def source(self) -> str: ...
    @property
    def expires_at(self) -> str | None: ...
    @property
    def status(self) -> str: ...
    @property
    def created(self) -> float: ...
    @property
    def updated(self) -> float: ...


@dataclass(frozen=True)
class Profile:
    """The cards to lead the block, and the items they came from (never injected again below)."""

    cards: tuple[Card, ...]
    item_ids: frozenset[int]
    tokens: int  # the cards' rendered lines, newline included, without the block around them


EMPTY = Profile((), frozenset(), 0)


def kind_of(fact: Fact) -> str | None:
    """Which kind of standing fact an item is, or None when it is not one."""
    return _kind(fact.key, fact.type)


@functools.lru_cache(maxsize=16_384)
def _kind(key: str, type: str) -> str | None:
    key = key.lower()
    if _HEALTH.search(key):
        return "health"
    if _IDENTITY.search(key):
        return "identity"
    if type == "preference":
        return "preference"
    if type == "task" or _TASK.search(key):
        return "task"
    return None


def standing(facts: Iterable[Fact], now: dt.datetime) -> list[Fact]:
    """The standing facts among ``facts``, best first by importance × recency (ties: oldest id)."""
    live = [
        f
        for f in facts
        if f.status == "active"
        and f.source == STATED
        and f.importance >= MIN_IMPORTANCE
        and kind_of(f) is not None
        and not is_expired(f.expires_at, now)
    ]
    return sorted(live, key=lambda f: (-rank_key(f), f.id))


def rank_key(fact: Fact) -> float:
    """log(importance × recency) plus a constant shared by every item at a given ``now``."""
    return math.log(max(fact.importance, 1e-6)) + math.log(2) * fact.updated / (HALF_LIFE_DAYS * 86_400)


def select_profile(
    facts: Iterable[Fact], now: dt.datetime, counter: TokenCounter, budget_tokens: int
) -> Profile:
    """The best standing facts whose cards fit ``budget_tokens``, one per key, grouped by kind.

    A fact that does not fit whole is skipped for a shorter one after it:
    a standing fact cut in half could say the opposite of the whole.
    """
    chosen: list[tuple[Fact, Card, int]] = []
    keys: set[str] = set()
    used = 0
    for fact in standing(facts, now)[:SCAN_LIMIT]:
        if budget_tokens - used < MIN_CARD_TOKENS:
            break
        if fact.key in keys:
            continue
        card = item_card(fact)
        cost = counter.text(render_card(card) + "\n")
        if used + cost > budget_tokens:
            continue
        chosen.append((fact, card, cost))
        keys.add(fact.key)
        used += cost
    order = {f.id: i for i, (f, _, _) in enumerate(chosen)}
    chosen.sort(key=lambda c: (KINDS.index(kind_of(c[0]) or "task"), order[c[0].id]))
    return Profile(tuple(c for _, c, _ in chosen), frozenset(f.id for f, _, _ in chosen), used)


def profile_of(facts: Iterable[Fact], settings: Memory, counter: TokenCounter, now: dt.datetime) -> Profile:
    """The tenant's profile for a user: ``EMPTY`` when ``memory.profile`` is off.

    Its budget is ``memory.profile_budget_tokens``, and never more than what
    ``memory.budget_tokens`` leaves beside the block's own markers and preamble.
    """
    if not settings.profile:
        return EMPTY
    room = settings.budget_tokens - counter.text(render_block([]))
    return select_profile(facts, now, counter, min(settings.profile_budget_tokens, room))


class ProfileMemo:
    """One user's last profile, answered again while nothing it depends on changed.

    The profile is byte-stable: the same items, settings and counter give
    the same cards, whatever ``now`` is — except that an item's expiry
    passes. So the memo holds for the same ``version`` of the items (the
    caller's: it must change whenever they do) between the last expiry
    before the moment it was computed and the first after (``now`` may go
    back: the eval replays dated conversations). An unchanged profile then
    costs a comparison instead of a selection and a token count per fact.
    """

    def __init__(self) -> None:
        self._key: tuple[Hashable, ...] | None = None
        self._profile = EMPTY
        self._since: dt.datetime | None = None
        self._until: dt.datetime | None = None

    def of(
        self, version: Hashable, facts: Sequence[Fact], settings: Memory, counter: TokenCounter, now: dt.datetime
    ) -> Profile:
        """``profile_of(facts, settings, counter, now)``, from the memo when it holds."""
        key = (version, settings.profile, settings.budget_tokens, settings.profile_budget_tokens, counter)
        if key == self._key and _between(now, self._since, self._until):
            return self._profile
        self._profile = profile_of(facts, settings, counter, now)
        self._key = key
        self._since, self._until = _expiries_around(facts, now)
        return self._profile


def _between(now: dt.datetime, since: dt.datetime | None, until: dt.datetime | None) -> bool:
    return (since is None or now >= since) and (until is None or now < until)


def _expiries_around(facts: Iterable[Fact], now: dt.datetime) -> tuple[dt.datetime | None, dt.datetime | None]:
    """The last expiry among ``facts`` at or before ``now`` and the first after it (None: there is none)."""
    since = until = None
    for fact in facts:
        moment = expiry_moment(fact.expires_at)
        if moment is None:
            continue
        if moment <= now:
            since = moment if since is None else max(since, moment)
        else:
            until = moment if until is None else min(until, moment)
    return since, until


def item_card(fact: Fact) -> Card:
    """A memory item as a card: its type, who said it, the day it was first recorded."""
    said: CardSource = "user said" if fact.source == "user-stated" else "inferred"
    kind: CardKind = fact.type if fact.type in _CARD_KINDS else "entity"  # type: ignore[assignment]
    day = dt.datetime.fromtimestamp(fact.created, dt.UTC).strftime("%Y-%m-%d")
    return Card(kind, said, day, fact.content, f"i{fact.id}")  # the id recall gives an item's hit

