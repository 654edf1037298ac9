"""Packing ranked hits into cards: best first, adjacent turns merged into one excerpt, within the budget."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from ..store.fragments import Fragment
from ..tokens import TokenCounter
from .cards import GAP, MIN_TRUNCATED_TOKENS, Card, CardSource, card_cost, pack, render_block
from .fragment_search import day_of
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
    cap = max(budget // 2, MIN_TRUNCATED_TOKENS)
    size = _Sizes(counter)
    base = counter.text(render_block([]))
    chosen: list[Excerpt] = []
    used = base
    edges: frozenset[tuple[str, float, int]] = frozenset()  # where a turn would join ``chosen``
    days: frozenset[str] = frozenset()  # the days ``chosen`` has a card for
    for hit in ranked[:SCAN_LIMIT]:
        if budget - used < MIN_ROOM:
            break
        frag = hit.fragment
        if frag is not None and min(frag.tokens - SLACK, cap) > budget - used:
            continue  # its own text is too long for the room left, alone or joined to an excerpt
        if len(days) >= top_k and (frag is None or (_edge(frag) not in edges and day_of(frag.created) not in days)):
            continue  # no room for another card, and it joins none (what by_day() would find, faster)
        trial = place(chosen, hit)
        if trial is None:
            continue
        groups = by_day(trial)
        if len(groups) > top_k:
            continue
        sizes = [size(g) for g in groups]
        if any(s > cap and (len(g) > 1 or len(g[0].members) > 1) for s, g in zip(sizes, groups, strict=True)):
            continue  # never let pack() cut a card's later turns
        total = base + sum(min(s, cap) for s in sizes)
        if total <= budget:
            chosen, used = trial, total
            edges = _edges(chosen)
            days = frozenset(g[0].card().date or "" for g in groups if g[0].lead.item is None)
    return pack(cards_of(chosen), counter, top_k, budget)


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


class _Sizes:
    """The tokens a group's card adds to the block, summed from its lines, each counted once.

    A card's count is its lines' (each with its newline): a line starts with
    "[", "User:", "Assistant:" or "…", where the tokenizer never joins it to
    the line before (``cards.pack`` re-counts the chosen cards exactly).
    """

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self.lines: dict[str, int] = {}
        self.gap = counter.text(GAP + "\n")

    def __call__(self, group: Sequence[Excerpt]) -> int:
        first = group[0].card()
        if group[0].lead.item is not None:
            return self._count("item " + first.id, lambda: card_cost(first, self.counter))
        header = replace(first, text="")
        total = self._count("day " + (first.date or ""), lambda: card_cost(header, self.counter))
        for ex in group:
            for h in ex.members:
                if h.id not in self.lines:
                    self.lines[h.id] = self.counter.text(_line(h.fragment) + "\n")
                total += self.lines[h.id]
        return total + self.gap * (len(group) - 1)

    def _count(self, key: str, count: Callable[[], int]) -> int:
        if key not in self.lines:
            self.lines[key] = count()
        return self.lines[key]


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
    return f"{'User' if frag.role == 'user' else 'Assistant'}: {frag.text}"


def _source(hit: Hit) -> CardSource:
    frag = hit.fragment
    return "user said" if frag is not None and frag.role == "user" else "assistant said"


def card_of(hit: Hit) -> Card:
    if hit.item is not None:
        item = hit.item
        said: CardSource = "user said" if item.source == "user-stated" else "inferred"
        return Card(item.type, said, day_of(item.created), item.content, hit.id)  # type: ignore[arg-type]
    return Card("fragment", _source(hit), day_of(_created(hit)), _line(hit.fragment), hit.id)


def _created(hit: Hit) -> float:
    assert hit.fragment is not None
    return hit.fragment.created
