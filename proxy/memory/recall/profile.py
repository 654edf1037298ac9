"""The profile: a user's standing facts, leading the memory block on every request (SPEC §5).

Pure: the items and ``now`` come in, cards go out; no store, no clock. A
standing fact is an active, unexpired item whose ``standing`` is true — what
the extraction model (or the rules, or the user by hand) said should shape
every answer, read from the memory schema and never from the text of a key.
The cards are grouped by ``category`` in the schema's order (health first,
then identity, the people in the user's life, lasting preferences, …).

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
import math
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from ...config import Memory
from ...tokens import TokenCounter
from ..lifecycle import expiry_moment, is_expired
from ..memory_schema import CATEGORIES, is_guess
from .cards import Card, item_card, render_block, render_card
from .changed_since import Stated, changed_later

HALF_LIFE_DAYS = 180.0
# No card fits in less room than this; past this many standing facts none would make the budget.
MIN_CARD_TOKENS = 8
SCAN_LIMIT = 40


class Fact(Stated, Protocol):
    """What the profile reads of a stored item, besides its card's fields (``store``'s item row has these)."""

    @property
    def category(self) -> str: ...
    @property
    def importance(self) -> float: ...
    @property
    def status(self) -> str: ...
    @property
    def updated(self) -> float: ...


F = TypeVar("F", bound=Fact)


@dataclass(frozen=True)
class Profile:
    """The cards to lead the block, and the items they came from (never injected again below)."""

    cards: tuple[Card, ...]
    item_ids: frozenset[int]
    tokens: int  # the cards' rendered lines, newline included, without the block around them
    guess_costs: tuple[tuple[str, int], ...] = ()  # its guesses' cards (``memory_schema.is_guess``): id, tokens
    # The ids of the facts a later one may have changed (``changed_since``), in the profile or not: never hits.
    changed: frozenset[int] = frozenset()

    @property
    def guesses(self) -> frozenset[str]:
        """The ids of its guesses' cards."""
        return frozenset(card_id for card_id, _ in self.guess_costs)

    @property
    def guessed(self) -> int:
        """Its guesses' tokens, within ``tokens``."""
        return sum(cost for _, cost in self.guess_costs)

    def beside(self, hits_tokens: int, room: int) -> Profile:
        """The profile shown beside hits of ``hits_tokens`` chosen in ``room`` (the block's budget but for
        the sure facts'): the best of its guesses that fit what the hits left, the others left out."""
        if hits_tokens + self.guessed <= room:
            return self
        kept, guessed = [], 0
        for card_id, cost in self.guess_costs:  # best first
            if hits_tokens + guessed + cost <= room:
                kept.append((card_id, cost))
                guessed += cost
        dropped = self.guesses - {card_id for card_id, _ in kept}
        cards = tuple(c for c in self.cards if c.id not in dropped)
        return Profile(cards, frozenset(int(c.id[1:]) for c in cards), self.tokens - self.guessed + guessed,
                       tuple(kept), self.changed)


EMPTY = Profile((), frozenset(), 0)


def left_out(facts: Iterable[F], profile: Profile, now: dt.datetime) -> list[F]:
    """The standing facts past the profile's budget, best first; not guesses (``memory_schema.is_guess``): a
    reading of a turn is not worth a place whatever the question; nor facts a later one may have changed."""
    skip = profile.item_ids | profile.changed
    return [f for f in standing(facts, now) if f.id not in skip and not is_guess(f.confidence)]


def listing(
    facts: Sequence[F], settings: Memory, counter: TokenCounter, now: dt.datetime,
    changed_by_turns: frozenset[int] = frozenset(),
) -> tuple[Profile, list[tuple[F, Card, bool]]]:
    """Every standing fact as the profile endpoint and the inspector show it, each with its card and whether
    it is within the profile's budget: the profile's own, then those past it (``left_out``'s, and those a
    later fact or turn may have changed, marked so: ``changed_by_turns``, the ids of the latter); none when
    ``memory.profile`` is off."""
    profile = profile_of(facts, settings, counter, now, changed_later(facts) | changed_by_turns)
    by_id = {f.id: f for f in facts}
    head = [(by_id[int(c.id[1:])], c, True) for c in profile.cards]
    past = [f for f in standing(facts, now) if f.id not in profile.item_ids and not is_guess(f.confidence)]
    rest = [(f, item_card(f, f.id in profile.changed), False) for f in past] if settings.profile else []
    return profile, [*head, *rest]


def beyond(
    rest: Sequence[Fact], profile: Profile, shown: Iterable[Card], asked: Sequence[int],
    fits: Callable[[Card], bool], slots: int,
) -> list[Card]:
    """Of the standing facts the profile's budget left out (``rest``: ``left_out``'s), those for the room the
    question's hits leave.

    A busy user's standing facts outgrow ``memory.profile_budget_tokens`` (a
    model writes each in 20-50 words: three fill the default), and a question
    that needs one of the others seldom names it ("a day trip this weekend"
    for where the user lives): they follow the profile, those the question
    matches best first (``asked``: item ids in the fusion's order), then the
    rest best first, each while ``fits`` says the block has room for its
    card, at most ``slots``, none shown already.
    """
    by_id = {f.id: f for f in rest}
    taken = {c.id for c in shown} | {c.text for c in profile.cards}
    out: list[Card] = []
    for fact_id in dict.fromkeys([*(i for i in asked if i in by_id), *by_id]):
        if len(out) >= slots:
            break
        card = item_card(by_id[fact_id])
        if card.id in taken or card.text in taken:
            continue
        if fits(card):
            out.append(card)
            taken |= {card.id, card.text}
    return out


def group_of(fact: Fact) -> int:
    """Where a standing fact's card goes in the profile: its category's place in the schema."""
    return CATEGORIES.index(fact.category) if fact.category in CATEGORIES else len(CATEGORIES)


def standing(facts: Iterable[F], now: dt.datetime) -> list[F]:
    """The standing facts among ``facts``, best first by importance × recency (ties: oldest id)."""
    live = [f for f in facts if f.standing and f.status == "active" and not is_expired(f.expires_at, now)]
    return sorted(live, key=lambda f: (-rank_key(f), f.id))


def rank_key(fact: Fact) -> float:
    """log(importance × recency) plus a constant shared by every item at a given ``now``."""
    return math.log(max(fact.importance, 1e-6)) + math.log(2) * fact.updated / (HALF_LIFE_DAYS * 86_400)


def select_profile(
    facts: Iterable[Fact], now: dt.datetime, counter: TokenCounter, budget_tokens: int,
    changed: frozenset[int] = frozenset(),
) -> Profile:
    """The best standing facts whose cards fit ``budget_tokens``, grouped by category.

    Two active facts of one key are two facts (a changed value supersedes the
    old one when it is stored, ``lifecycle.decide``): both may stand.

    A fact that does not fit whole is skipped for a shorter one after it:
    a standing fact cut in half could say the opposite of the whole. Guesses
    (``memory_schema.is_guess``) take the room the sure facts leave, best
    first: a guess never pushes out a fact read surely. Facts a later one may have changed
    (``changed``: ``changed_since``) take the room left after that, marked so on their cards.
    """
    chosen: list[tuple[Fact, Card, int]] = []
    said: set[str] = set()
    used = 0
    ranked = standing(facts, now)[:SCAN_LIMIT]
    for fact in sorted(ranked, key=lambda f: (f.id in changed, is_guess(f.confidence))):  # a stable sort
        if budget_tokens - used < MIN_CARD_TOKENS:
            break
        if fact.content in said:  # the same words kept twice: one card
            continue
        card = item_card(fact, fact.id in changed)
        cost = counter.text(render_card(card) + "\n")
        if used + cost > budget_tokens:
            continue
        chosen.append((fact, card, cost))
        said.add(fact.content)
        used += cost
    guess_costs = tuple((card.id, cost) for fact, card, cost in chosen if is_guess(fact.confidence))
    order = {f.id: i for i, (f, _, _) in enumerate(chosen)}
    chosen.sort(key=lambda c: (group_of(c[0]), order[c[0].id]))
    return Profile(tuple(c for _, c, _ in chosen), frozenset(f.id for f, _, _ in chosen), used, guess_costs,
                   changed)


def profile_of(
    facts: Sequence[Fact], settings: Memory, counter: TokenCounter, now: dt.datetime,
    changed: frozenset[int] | None = None,
) -> Profile:
    """The tenant's profile for a user: no cards when ``memory.profile`` is off.

    Its budget is ``memory.profile_budget_tokens``, and never more than what
    ``memory.budget_tokens`` leaves beside the block's own markers and preamble.
    ``changed``: ``changed_later(facts)``, when the caller has it.
    """
    changed = changed_later(facts) if changed is None else changed
    if not settings.profile:
        return Profile((), frozenset(), 0, (), changed)
    room = settings.budget_tokens - counter.text(render_block([]))
    return select_profile(facts, now, counter, min(settings.profile_budget_tokens, room), changed)


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
        self._rest: list[Fact] | None = None

    def of(
        self, version: Hashable, facts: Sequence[Fact], settings: Memory, counter: TokenCounter, now: dt.datetime,
        changed: frozenset[int] | None = None,
    ) -> Profile:
        """``profile_of(facts, settings, counter, now, changed)``, from the memo when it holds (``changed``:
        the ids of ``facts`` marked, which a later turn can change without a new ``version``)."""
        key = (version, changed, settings.profile, settings.budget_tokens, settings.profile_budget_tokens, counter)
        if key == self._key and _between(now, self._since, self._until):
            return self._profile
        self._profile = profile_of(facts, settings, counter, now, changed)
        self._key = key
        self._since, self._until = _expiries_around(facts, now)
        self._rest = None
        return self._profile

    def left_out(self, facts: Sequence[Fact], now: dt.datetime) -> list[Fact]:
        """``left_out(facts, profile, now)`` of the profile ``of`` last answered (the same ``facts``), once."""
        if self._rest is None:
            self._rest = left_out(facts, self._profile, now)
        return self._rest


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
