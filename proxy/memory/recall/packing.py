"""Packing ranked hits into cards: best first, within the budget, a card per stretch of the history.

A card is an item, or a *stretch* of the user's history: the turns chosen
from it, in the order they were said, each at most ``CARD_TURNS`` of the
user's turns from the next (``stretches``). A turn's place is its place in
that user's own history (``ScopeIndex.turn_of``): on a busy proxy dozens of
other users' turns are stored between two of hers, and they are no
distance. Consecutive turns of a session form one excerpt; a ``…`` line
stands between two excerpts of a card (two parts of a chat, or two chats
one after the other). What groups turns is their distance in turns, never
the calendar: a chat over months is one history whose far turns are far
apart, and five chats of one morning are five parts of it. A card's header
shows the date its turns were said, so a date change also starts a new card
(a header names one date). A turn a later one may have changed
(``changed_since.turns_changed_later``) stands on a card of its own, marked
so in its header. Turns that tell nothing the block does not are
left out (``content``). Cards stand in the order of their best hit: the
best match leads the block.
"""

from __future__ import annotations

import bisect
import functools
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from ...store.records import Fragment
from ...tokens import TokenCounter
from ..search.fragment_index import day_of
from .cards import (
    GAP,
    MIN_TRUNCATED_TOKENS,
    Card,
    CardSource,
    card_cost,
    item_card,
    pack,
    render_block,
    render_card,
    said,
)
from .content import informative, near_duplicate, terms_of
from .ranking import Hit

# Packing stops scanning after this many candidates, or when less room is left.
SCAN_LIMIT = 120
MIN_ROOM = 12
# A turn adds at least its own tokens less this to any card it joins (the
# tokenizer may merge across the line's start): packing skips a turn longer
# than the room left without rendering and counting its card.
SLACK = 2
# Chosen turns at most this many turns apart in the history share a card (a chat of LoCoMo is 20-30 turns).
CARD_TURNS = 40

Stretch = list[list[Hit]]  # a card in the making: its excerpts, each a run of consecutive turns
TurnOf = Callable[[Fragment], int]  # a turn's place in its user's history
# A turn: its place in the history, the order it was taken, its hit, and its header: the day it was said and
# whether a later turn may have changed it (a card's header shows one date, marked or not: turns said on two
# days are two cards, and so are a marked turn and the turns beside it).
Header = tuple[float, bool]
Entry = tuple[int, int, Hit, Header]


def _none(term: str) -> bool:
    return False  # no history to read: no word is common


def select(
    ranked: Sequence[Hit],
    counter: TokenCounter,
    top_k: int,
    budget: int,
    is_common: Callable[[str], bool] = _none,
    turn_of: TurnOf | None = None,
    changed: frozenset[int] = frozenset(),
) -> list[Card]:
    """The cards to inject: best hits first, a card per item or stretch, within ``budget`` tokens.

    At most ``top_k`` cards. A turn made only of words common in the user's
    history (``is_common``) and a near-repeat of a turn taken are left out
    (``content``): the budget goes to distinct content. A hit that does not fit whole is skipped for a
    later, shorter one, so a turn is never cut short for want of room —
    except a single fragment longer than half the budget, which ``pack``
    truncates. ``turn_of``: a turn's place in the user's history (by default
    its id, which is that place when the user's turns are the only ones stored). ``changed``: the ids of
    the turns a later one may have changed.
    """
    tally = Tally(counter, budget, top_k, turn_of, changed)
    shown: list[frozenset[str]] = []  # the search terms of each turn taken
    for hit in itertools.islice(ranked, SCAN_LIMIT):  # no slice: a lazy ranking builds only the hits read
        if budget - tally.used < MIN_ROOM:
            break
        frag = hit.fragment
        if frag is None:
            tally.add(hit)
            continue
        if min(frag.tokens - SLACK, tally.cap) > budget - tally.used:
            continue  # its own text is too long for the room left, alone or joined to a card
        if tally.refuses(hit):
            continue  # it would be a card past top_k, or join a full one (what ``add`` finds, cheaply)
        terms = terms_of(frag.text)
        if not informative(terms, is_common) or near_duplicate(terms, shown):
            continue  # it tells nothing the block does not (``content``)
        if tally.add(hit):
            shown.append(terms)
    return fitted(tally.cards(), tally, top_k)


def fitted(cards: list[Card], tally: Tally, top_k: int) -> list[Card]:
    """``cards`` as the tally counted them, checked by one count of the whole block.

    ``pack`` re-counts card by card and truncates: needed only when a card
    was counted at the cap (one turn or item longer than half the budget) or
    the tokenizer did not add up as the tally did.
    """
    if not tally.capped and tally.counter.text(render_block(cards)) <= tally.budget:
        return cards
    return pack(cards, tally.counter, top_k, tally.budget)


def stretches(
    turns: Sequence[Hit], turn_of: TurnOf | None = None, changed: frozenset[int] = frozenset()
) -> list[Stretch]:
    """The chosen turns, in the order of the user's history (``turn_of``), as cards: a new card
    where the next turn is more than ``CARD_TURNS`` of the user's turns on or said on another date
    (a header shows one date) or is marked where the last was not (``changed``) or the other way round,
    a new excerpt where it is not the next turn of the same session."""
    place = turn_of or by_id
    return _stretches([_as_entry(place, h, 0, changed) for h in turns])


def _stretches(entries: Sequence[Entry]) -> list[Stretch]:
    """``stretches`` of turns whose places are known: (place in the history, order taken, hit)."""
    out: list[Stretch] = []
    last: Entry | None = None
    for entry in entries:
        hit = entry[2]
        if last is None or not _linked(last, entry):
            out.append([[hit]])
        elif _next_turn(last[2], hit):
            out[-1][-1].append(hit)
        else:
            out[-1].append([hit])
        last = entry
    return out


class Tally:
    """The block in the making: the hits taken, by session, and its tokens, each line counted once.

    A card's count is its header's and its lines' (each with its newline): a
    line starts with "[", "User:", "Assistant:" or "…", where the tokenizer
    never joins it to the line before; ``fitted`` counts the finished block
    once to check. A card over half the budget (``cap``) counts as ``cap``:
    only a single turn or item may be that long, and ``pack`` truncates it.
    Each card of turns keeps its size (``_Span``), so a hit next to a card
    that is full already is refused without counting the card again
    (``refuses``): in a long chat most hits are.
    """

    def __init__(
        self, counter: TokenCounter, budget: int, top_k: int, turn_of: TurnOf | None = None,
        changed: frozenset[int] = frozenset(),
    ) -> None:
        self.counter = counter
        self.turn_of = turn_of or by_id
        self.changed = changed
        self.budget = budget
        self.top_k = top_k
        self.cap = max(budget // 2, MIN_TRUNCATED_TOKENS)
        self.used = _tokens(counter, render_block([]))
        self.cards_count = 0
        self.capped = False  # a card counted as ``cap``: ``pack`` must truncate it
        self.items: list[tuple[int, Hit]] = []  # (order taken, hit)
        self.turns: list[Entry] = []  # in history order
        self._places: list[int] = []  # the turns' places, for bisect (a later one of a place goes after)
        self._taken = 0
        self._lines: dict[int, int] = {}  # a turn's line: its tokens (by fragment id)
        self._headers: dict[tuple[str, bool], int] = {}  # a card's header: its tokens (by date and mark)
        self._cards_of: dict[int, _Span] = {}  # each turn taken (by id of its hit): its card as taken
        self._largest = 0  # no card of turns is larger (tokens, not capped)

    def add(self, hit: Hit) -> bool:
        """Count ``hit`` in, alone or joining its session's cards, if the block still fits."""
        if hit.fragment is None:
            size = card_cost(card_of(hit), self.counter)
            if self.cards_count >= self.top_k or self.used + min(size, self.cap) > self.budget:
                return False
            self.used += min(size, self.cap)
            self.capped |= size > self.cap
            self.cards_count += 1
            self.items.append((self._take(), hit))
            return True
        entry = self._entry(hit)
        at = bisect.bisect(self._places, entry[0])
        turns = list(self.turns)
        turns.insert(at, entry)
        # Only the cards around the new turn change: the run of turns it is linked to on each side, and the
        # card it cuts in two when it lands inside one it does not join (a marked turn, or one of another date).
        cut = 0 < at < len(turns) - 1 and _linked(turns[at - 1], turns[at + 1]) and not (
            _linked(turns[at - 1], entry) and _linked(entry, turns[at + 1]))
        lo, hi = (at - 1, at + 1) if cut else (at, at)
        while lo > 0 and _linked(turns[lo - 1], turns[lo]):
            lo -= 1
        while hi + 1 < len(turns) and _linked(turns[hi], turns[hi + 1]):
            hi += 1
        run = turns[lo : hi + 1]
        changed = self._spans(_stretches(run))
        after = self._cost(changed)
        if after is None:
            return False  # a card of several turns would pass the cap: never let pack() cut its later turns
        before = self._cost(self._spans(_stretches([e for e in run if e is not entry])))
        assert before is not None  # cards the tally took
        used = self.used - before[0] + after[0]
        count = self.cards_count - before[1] + after[1]
        if used > self.budget or count > self.top_k:
            return False
        self.used, self.cards_count, self.capped = used, count, self.capped or after[2]
        self.turns = turns
        self._places.insert(at, entry[0])
        self._take()
        if cut:  # every card counted again
            every = self._spans(_stretches(turns))
            self._cards_of = {id(h): span for span in every for h in span.members}
            self._largest = max(span.size for span in every)
        else:  # the run is the one card that changed
            (span,) = changed
            self._cards_of.update((id(h), span) for h in span.members)
            self._largest = max(self._largest, span.size)
        return True

    def refuses(self, hit: Hit) -> bool:
        """Whether ``add`` would surely refuse ``hit`` (a turn), told without counting a card: it would
        start a card when ``top_k`` are taken, or it would join a card and take it past the cap."""
        prev, after = self._neighbours(self._entry(hit))
        if prev is None and after is None:
            return self.cards_count >= self.top_k
        return self._past_cap(hit, prev, after)

    def _past_cap(self, hit: Hit, prev: Hit | None, after: Hit | None) -> bool:
        """Whether ``hit``, a turn that links to ``prev`` or ``after`` (the turns taken beside it), would
        surely take the card it joins past the cap: told from the size of a card it takes in whole,
        without counting that card again. Most hits of a long chat are near a card that is full already.

        A card taken in whole keeps its header (turns of one card share a date) and its lines, and
        gains the turn's line; its excerpts gain one gap, or lose one where the turn falls between two
        of its turns; what else joins only adds. It is taken in whole when the turn links to it and it
        ends (or begins) beside the turn, or when the turn links on both sides.
        """
        line = self._line_tokens(hit)
        if self._largest + line + self._gap <= self.cap:
            return False  # no card is that close to it
        least = 0
        if prev is not None:
            span = self._cards_of[id(prev)]
            if span.last is prev:  # the card ends beside the turn: the turn extends it, or starts an excerpt
                least = span.size + line + (0 if _next_turn(prev, hit) else self._gap)
            elif after is not None:
                least = span.size + line - self._gap  # between two of its turns
        if after is not None:
            span = self._cards_of[id(after)]
            if span.first is after:
                least = max(least, span.size + line + (0 if _next_turn(hit, after) else self._gap))
        return least > self.cap

    def _entry(self, hit: Hit) -> Entry:
        """``hit`` as a turn the tally would take next: its place in the history, the order taken."""
        return _as_entry(self.turn_of, hit, self._taken, self.changed)

    def _neighbours(self, entry: Entry) -> tuple[Hit | None, Hit | None]:
        """The turns taken just before and after ``entry`` in the history that it links to (else None)."""
        at = bisect.bisect(self._places, entry[0])
        before = self.turns[at - 1] if at > 0 else None
        after = self.turns[at] if at < len(self.turns) else None
        return (before[2] if before is not None and _linked(before, entry) else None,
                after[2] if after is not None and _linked(entry, after) else None)

    def _spans(self, cards: list[Stretch]) -> list[_Span]:
        """``cards`` with their sizes (not capped)."""
        out = []
        for stretch in cards:
            members = [h for excerpt in stretch for h in excerpt]
            out.append(_Span(members[0], members[-1], members, self._size(stretch)))
        return out

    def _size(self, stretch: Stretch) -> int:
        """A card's tokens: its header's, a gap line's between two excerpts, its lines'."""
        first = stretch[0][0].fragment
        assert first is not None
        size = self._header(day_of(first.created), first.id in self.changed) + self._gap * (len(stretch) - 1)
        return size + sum(self._line_tokens(h) for excerpt in stretch for h in excerpt)

    def cards(self) -> list[Card]:
        """The cards of the hits taken, each where its best hit was taken: the best match first."""
        placed: list[tuple[int, Card]] = [(order, card_of(hit)) for order, hit in self.items]
        taken = {id(entry[2]): entry[1] for entry in self.turns}
        for stretch in _stretches(self.turns):
            members = [h for excerpt in stretch for h in excerpt]
            best = min(members, key=lambda h: taken[id(h)])
            placed.append((taken[id(best)], stretch_card(stretch, best, self.changed)))
        placed.sort(key=lambda p: p[0])
        return [card for _, card in placed]

    def _cost(self, cards: list[_Span]) -> tuple[int, int, bool] | None:
        """(tokens, cards, any counted at the cap) of the turns' cards; None when a card of several
        turns is over the cap."""
        tokens, capped = 0, False
        for card in cards:
            if card.size > self.cap:
                if len(card.members) > 1:
                    return None
                capped = True
            tokens += min(card.size, self.cap)
        return tokens, len(cards), capped

    def _line_tokens(self, hit: Hit) -> int:
        # Every add re-counts the cards of the turns taken: each turn's line is rendered and counted once.
        assert hit.fragment is not None
        key = hit.fragment.id
        found = self._lines.get(key)
        if found is None:
            found = self._lines[key] = _tokens(self.counter, _line(hit.fragment) + "\n")
        return found

    def _header(self, date: str, changed: bool) -> int:
        found = self._headers.get((date, changed))
        if found is None:
            found = self._headers[date, changed] = _tokens(
                self.counter, render_card(Card("fragment", "user said", date, "", "", changed=changed)) + "\n"
            )
        return found

    @functools.cached_property
    def _gap(self) -> int:
        return _tokens(self.counter, GAP + "\n")

    def _take(self) -> int:
        self._taken += 1
        return self._taken - 1


@dataclass(frozen=True)
class _Span:
    """A card of the turns taken: its first and last hit in history order, its members, its tokens."""

    first: Hit
    last: Hit
    members: list[Hit]
    size: int  # not capped


@functools.lru_cache(maxsize=20_000)
def _tokens(counter: TokenCounter, line: str) -> int:
    """A line's tokens, remembered across requests: the same turns come back in many blocks."""
    return counter.text(line)


def stretch_card(stretch: Stretch, lead: Hit, changed: frozenset[int] = frozenset()) -> Card:
    """One card of a stretch: its date, its excerpts' lines with a ``…`` line between two, and whether a
    later turn may have changed its turns (``changed``: the ids of those; a card's turns all are or none)."""
    first = stretch[0][0].fragment
    assert first is not None
    text = f"\n{GAP}\n".join("\n".join(_line(h.fragment) for h in excerpt) for excerpt in stretch)
    ids = ",".join(h.id for excerpt in stretch for h in excerpt)
    return Card("fragment", _source(lead), day_of(first.created), text, ids, changed=first.id in changed)


def by_id(frag: Fragment) -> int:
    """A turn's place by its id: fragments are numbered as they are stored, so this is its place in
    the user's history when no other user's turns were stored in between (a unit's hits)."""
    return frag.id


def _as_entry(place: TurnOf, hit: Hit, order: int, changed: frozenset[int]) -> Entry:
    frag = _fragment(hit)
    return place(frag), order, hit, (frag.created // 86_400, frag.id in changed)


def _linked(last: Entry, entry: Entry) -> bool:
    """Whether ``entry``, the next turn in history order after ``last``, joins its card: near enough
    in the history, said the same day (a header names one date), both marked or neither."""
    return entry[0] - last[0] <= CARD_TURNS and entry[3] == last[3]


def _fragment(hit: Hit) -> Fragment:
    assert hit.fragment is not None
    return hit.fragment


def _next_turn(a: Hit, b: Hit) -> bool:
    """Whether ``b`` is the turn after ``a`` in ``a``'s session (one excerpt)."""
    first, then = _fragment(a), _fragment(b)
    return first.session == then.session and then.position - first.position == 1


def _line(frag: Fragment | None) -> str:
    assert frag is not None
    return said("User" if frag.role == "user" else "Assistant", frag.text)


def _source(hit: Hit) -> CardSource:
    frag = hit.fragment
    return "user said" if frag is not None and frag.role == "user" else "assistant said"


def card_of(hit: Hit) -> Card:
    if hit.item is not None:
        return replace(item_card(hit.item), id=hit.id)
    return Card("fragment", _source(hit), day_of(_fragment(hit).created), _line(hit.fragment), hit.id)
