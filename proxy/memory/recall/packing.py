"""Packing ranked hits into cards: best first, adjacent turns merged into one excerpt, within the budget."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
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
from .ranking import Hit

# Packing stops scanning after this many candidates, or when less room is left.
SCAN_LIMIT = 120
MIN_ROOM = 12
# A turn adds at least its own tokens less this to any card it joins (the
# tokenizer may merge across the line's start): packing skips a turn longer
# than the room left without rendering and counting its card.
SLACK = 2


@dataclass(frozen=True)
class Excerpt:
    """Cards in the making: one item, or adjacent fragments of one session and day."""

    lead: Hit  # the best-ranked member: it gives the card its source
    members: tuple[Hit, ...]  # fragments in conversation order; (lead,) for an item

    def card(self) -> Card:
        return self._card

    @functools.cached_property
    def _card(self) -> Card:
        if self.lead.item is not None:
            return card_of(self.lead)
        lines = [_line(h.fragment) for h in self.members if h.fragment]
        first = self.members[0].fragment
        assert first is not None
        ids = ",".join(h.id for h in self.members)
        return Card("fragment", _source(self.lead), day_of(first.created), "\n".join(lines), ids)


def select(ranked: Sequence[Hit], counter: TokenCounter, top_k: int, budget: int) -> list[Card]:
    """The cards to inject: best hits first, adjacent fragments merged, within ``budget`` tokens.

    At most ``top_k`` cards; a card is an item, or what was said on one day
    (``cards_of``). A hit that does not fit whole is skipped for a later,
    shorter one, so a turn is never cut short for want of room — except a
    single fragment longer than half the budget, which ``pack`` truncates.
    """
    tally = Tally(counter, budget)
    chosen: list[Excerpt] = []
    edges: frozenset[tuple[str, float, int]] = frozenset()  # where a turn would join ``chosen``
    taken: frozenset[tuple[str, float, int]] = frozenset()  # where its turns are
    for hit in itertools.islice(ranked, SCAN_LIMIT):  # no slice: a lazy ranking builds only the hits read
        if budget - tally.used < MIN_ROOM:
            break
        frag = hit.fragment
        if frag is not None and min(frag.tokens - SLACK, tally.cap) > budget - tally.used:
            continue  # its own text is too long for the room left, alone or joined to an excerpt
        if tally.cards >= top_k and (frag is None or day_of(frag.created) not in tally.days):
            continue  # no room for another card
        if frag is None or _edge(frag) not in edges:
            # It joins no excerpt (what place() would find, without the scan): a new one,
            # unless a turn of its place is in one already.
            if (frag is None or _edge(frag) not in taken) and tally.add(hit, 0):
                chosen = [*chosen, Excerpt(hit, (hit,))]
                if frag is not None:  # it touches no excerpt: only its own edges are new
                    edges, taken = edges | {_edge(frag, -1), _edge(frag, 1)}, taken | {_edge(frag)}
            continue
        trial = place(chosen, hit)
        if trial is not None and tally.add(hit, len(chosen) + 1 - len(trial)):  # it joined 1 or 2
            chosen, edges, taken = trial, _edges(trial), taken | {_edge(frag)}
    return fitted(cards_of(chosen), tally, top_k)


def fitted(cards: list[Card], tally: Tally, top_k: int) -> list[Card]:
    """``cards`` as the tally counted them, checked by one count of the whole block.

    ``pack`` re-counts card by card and truncates: needed only when a card
    was counted at the cap (one turn or item longer than half the budget) or
    the tokenizer did not add up as the tally did.
    """
    if not tally.capped and tally.counter.text(render_block(cards)) <= tally.budget:
        return cards
    return pack(cards, tally.counter, top_k, tally.budget)


class Tally:
    """The tokens of the block in the making, kept as hits are added, each line counted once.

    A card's count is its lines' (each with its newline): a line starts with
    "[", "User:", "Assistant:" or "…", where the tokenizer never joins it to
    the line before; ``cards.pack`` re-counts the chosen cards exactly. A card
    over half the budget (``cap``) counts as ``cap``: only a single turn may be
    that long, and ``pack`` truncates it.
    """

    def __init__(self, counter: TokenCounter, budget: int) -> None:
        self.counter = counter
        self.budget = budget
        self.cap = max(budget // 2, MIN_TRUNCATED_TOKENS)
        self.used = _tokens(counter, render_block([]))
        self.days: dict[str, int] = {}  # each day's card: its tokens so far
        self.cards = 0
        self.capped = False  # a card counted as ``cap``: ``pack`` must truncate it

    def add(self, hit: Hit, joined: int) -> bool:
        """Count ``hit`` in, joining ``joined`` excerpts of its day (0: a new excerpt), if it fits."""
        if hit.fragment is None:
            size = card_cost(card_of(hit), self.counter)
            if self.used + min(size, self.cap) > self.budget:
                return False
            self.used += min(size, self.cap)
            self.capped |= size > self.cap
            self.cards += 1
            return True
        day = day_of(hit.fragment.created)
        line = _tokens(self.counter, _line(hit.fragment) + "\n")
        before = self.days.get(day)
        if before is None:
            size = _tokens(self.counter, render_card(Card("fragment", "user said", day, "", "")) + "\n") + line
        else:
            size = before + line + (self.gap, 0, -self.gap)[joined]
            if size > self.cap:
                return False  # never let pack() cut a card's later turns
        used = self.used - min(before or 0, self.cap) + min(size, self.cap)
        if used > self.budget:
            return False
        self.used, self.days[day] = used, size
        self.cards += before is None
        self.capped |= size > self.cap
        return True

    @functools.cached_property
    def gap(self) -> int:
        return _tokens(self.counter, GAP + "\n")


@functools.lru_cache(maxsize=20_000)
def _tokens(counter: TokenCounter, line: str) -> int:
    """A line's tokens, remembered across requests: the same turns come back in many blocks."""
    return counter.text(line)


def by_day(excerpts: Sequence[Excerpt]) -> list[list[Excerpt]]:
    """The excerpts a card each: an item alone, and every excerpt of one day together.

    A day's group stands where its best excerpt does; inside it, excerpts keep
    the order they were chosen in.
    """
    out: list[list[Excerpt]] = []
    at: dict[str, list[Excerpt]] = {}
    for ex in excerpts:
        day = ex.card().date if ex.lead.item is None else None
        if day is not None and day in at:
            at[day].append(ex)
            continue
        out.append([ex])
        if day is not None:
            at[day] = out[-1]
    return out


def cards_of(excerpts: Sequence[Excerpt]) -> list[Card]:
    """The cards of ``by_day``'s groups: one day's excerpts under one header, a ``…`` line between two.

    The excerpts of a day are not consecutive turns, and a date said once, not
    once per excerpt, leaves the budget to the turns.
    """
    out = []
    for group in by_day(excerpts):
        first = group[0].card()
        text = f"\n{GAP}\n".join(ex.card().text for ex in group)
        out.append(replace(first, text=text, id=",".join(ex.card().id for ex in group)))
    return out


def _edges(chosen: Sequence[Excerpt]) -> frozenset[tuple[str, float, int]]:
    """(session, day, position) of the turns right before and after each excerpt: where ``place`` joins."""
    out = set()
    for ex in chosen:
        first, last = ex.members[0].fragment, ex.members[-1].fragment
        if first is not None and last is not None:
            out.add(_edge(first, -1))
            out.add(_edge(last, 1))
    return frozenset(out)


def _edge(frag: Fragment, offset: int = 0) -> tuple[str, float, int]:
    return (frag.session, frag.created // 86_400, frag.position + offset)


def place(chosen: Sequence[Excerpt], hit: Hit) -> list[Excerpt] | None:
    """``chosen`` with ``hit`` added: joined to the excerpts it touches, or as a new one.

    None when the hit is already in an excerpt.
    """
    frag = hit.fragment
    if frag is None:
        return [*chosen, Excerpt(hit, (hit,))]
    touching = []
    for i, ex in enumerate(chosen):
        first, last = ex.members[0].fragment, ex.members[-1].fragment
        if first is None or last is None or not _same_day(first, frag):
            continue
        if first.position <= frag.position <= last.position:
            return None
        if frag.position in (first.position - 1, last.position + 1):
            touching.append(i)
    if not touching:
        return [*chosen, Excerpt(hit, (hit,))]
    members = sorted(
        [hit, *(m for i in touching for m in chosen[i].members)],
        key=lambda h: h.fragment.position if h.fragment else 0,
    )
    merged = Excerpt(chosen[touching[0]].lead, tuple(members))
    rest = [ex for i, ex in enumerate(chosen) if i not in touching[1:]]
    return [merged if ex is chosen[touching[0]] else ex for ex in rest]


def _same_day(a: Fragment, b: Fragment) -> bool:
    # One card carries one date: a one-chat conversation spans many days.
    return a.session == b.session and a.created // 86_400 == b.created // 86_400


def _line(frag: Fragment | None) -> str:
    assert frag is not None
    return said("User" if frag.role == "user" else "Assistant", frag.text)


def _source(hit: Hit) -> CardSource:
    frag = hit.fragment
    return "user said" if frag is not None and frag.role == "user" else "assistant said"


def card_of(hit: Hit) -> Card:
    if hit.item is not None:
        return replace(item_card(hit.item), id=hit.id)
    return Card("fragment", _source(hit), day_of(_created(hit)), _line(hit.fragment), hit.id)


def _created(hit: Hit) -> float:
    assert hit.fragment is not None
    return hit.fragment.created
